from rl.core import doctor


def test_report_lists_the_six_packages_and_the_cpu_kernel():
    report = doctor.collect()
    assert set(report) == {
        "platform",
        "rl packages",
        "compiled kernels",
        "engines",
        "third-party",
    }
    packages = {check.name for check in report["rl packages"]}
    assert packages >= {"rl-core", "rl-kernels", "rl-fsdp", "rl-megatron", "rl-rollout", "rl-cli"}
    kernels = {check.name: check.ok for check in report["compiled kernels"]}
    assert kernels["kernels: reference"] and kernels["kernels: cpp"]


def test_sections_a_caller_adds_stand_before_the_third_party_packages():
    added = [doctor.Check("dialect: verl", True, "config files")]
    report = doctor.collect({"config dialects": added})
    assert list(report)[-2:] == ["config dialects", "third-party"]
    assert report["config dialects"] == added


def test_missing_third_party_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(
        doctor, "THIRD_PARTY", (("Nothing", ("no-such-dist-zz",), "no_such_zz", "pip install zz"),)
    )
    (check,) = doctor.third_party_checks()
    assert not check.ok and check.detail == "not installed (pip install zz)"


def test_rl_packages_versions_match_the_modules():
    import rl.cli
    import rl.core
    import rl.fsdp
    import rl.kernels
    import rl.megatron
    import rl.rollout

    versions = doctor.rl_packages()
    for name, module in [
        ("rl-core", rl.core),
        ("rl-kernels", rl.kernels),
        ("rl-fsdp", rl.fsdp),
        ("rl-megatron", rl.megatron),
        ("rl-rollout", rl.rollout),
        ("rl-cli", rl.cli),
    ]:
        assert versions[name] == module.__version__
