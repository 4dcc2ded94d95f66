"""The supported-version check, the missing-SGLang install hint, and the log-prob environment."""

import pytest

from rl.core.imports import MissingDependencyError, is_installed
from rl.rollout.sglang import SGLangRolloutEngine
from rl.rollout.sglang.logprobs import LogprobSemanticsError, check_logprob_environment
from rl.rollout.sglang.version import (
    SUPPORTED_SGLANG,
    UnsupportedSGLangError,
    check_sglang_version,
    import_sglang,
)


@pytest.mark.parametrize("version", ["0.5.0", "0.5.2", "0.5.6.post2", "0.5.10rc0", "0.5.1rc1"])
def test_versions_in_the_range_pass(version):
    check_sglang_version(version)


@pytest.mark.parametrize("version", ["0.4.10", "0.4.6.post5", "0.6.0", "1.0.0", "0.6.0rc1"])
def test_versions_outside_name_the_range(version):
    with pytest.raises(UnsupportedSGLangError) as error:
        check_sglang_version(version)
    message = str(error.value)
    assert f"sglang {version} is installed" in message
    assert SUPPORTED_SGLANG in message and "pip install 'sglang>=0.5.0,<0.6'" in message


def test_an_unparsable_version_is_refused():
    with pytest.raises(UnsupportedSGLangError, match="'unknown'.*not a version number"):
        check_sglang_version("unknown")


@pytest.mark.skipif(is_installed("sglang"), reason="SGLang is installed here")
def test_missing_sglang_gives_the_install_hint():
    with pytest.raises(MissingDependencyError) as error:
        import_sglang()
    assert str(error.value) == (
        "sglang is not installed for the SGLang rollout engine: pip install 'rl-rollout[sglang]'"
    )


@pytest.mark.skipif(is_installed("sglang"), reason="SGLang is installed here")
def test_building_the_engine_without_sglang_gives_the_hint():
    with pytest.raises(MissingDependencyError, match=r"pip install 'rl-rollout\[sglang\]'"):
        SGLangRolloutEngine({"model_path": "m"}, tokenizer=object())


@pytest.mark.parametrize("name", ["SGLANG_RETURN_ORIGINAL_LOGPROB", "RETURN_ORIGINAL_LOGPROB"])
@pytest.mark.parametrize("value", ["1", "true", "True"])
def test_unscaled_logprob_switches_are_refused(name, value):
    with pytest.raises(LogprobSemanticsError, match=f"Unset {name}"):
        check_logprob_environment({name: value})


@pytest.mark.parametrize("value", ["", "0", "false"])
def test_switches_off_are_fine(value):
    check_logprob_environment({"SGLANG_RETURN_ORIGINAL_LOGPROB": value})
