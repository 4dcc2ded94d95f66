import pytest

from rl.core.imports import MissingDependencyError, is_installed, require


def test_require_returns_the_module():
    assert require("json", "json").dumps([1]) == "[1]"


def test_missing_module_names_the_extra_in_one_line():
    with pytest.raises(MissingDependencyError) as info:
        require("no_such_pkg_abc.sub", "rl-rollout[vllm]", "the vLLM rollout engine")
    message = str(info.value)
    assert message == (
        "no_such_pkg_abc.sub is not installed for the vLLM rollout engine: "
        "pip install 'rl-rollout[vllm]'"
    )
    assert "\n" not in message


def test_a_broken_import_inside_an_installed_package_is_not_hidden(tmp_path, monkeypatch):
    package = tmp_path / "halfbroken"
    package.mkdir()
    (package / "__init__.py").write_text("import no_such_dependency_q\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_q"):
        require("halfbroken", "halfbroken")


def test_is_installed_does_not_import():
    assert is_installed("json") and not is_installed("no_such_pkg_abc")
    assert not is_installed("no_such_pkg_abc.sub")
