"""MLflow with its local file store under the output folder (the default when
MLFLOW_TRACKING_URI is unset): what the sink logs is read back with `MlflowClient`."""

import json

import pytest

from rl.core.config import load_config, to_dict
from rl.core.logging import make_tracker
from rl.core.logging.sinks import MlflowSink, mlflow_params

mlflow = pytest.importorskip(
    "mlflow", reason="mlflow is not installed: pip install 'rl-core[mlflow]'"
)
from mlflow.exceptions import MlflowException  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402


def read_mlflow_run(uri, experiment, run_name, keys):
    """The run `run_name` of `experiment` at `uri`: status, params, config.json and
    {step: metrics} from each key's metric history."""
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs(
        [client.get_experiment_by_name(experiment).experiment_id],
        filter_string=f"attributes.run_name = '{run_name}'",
    )
    history: dict[int, dict[str, float]] = {}
    for key in keys:
        for metric in client.get_metric_history(run.info.run_id, key):
            history.setdefault(metric.step, {})[key] = metric.value
    artifacts = [a.path for a in client.list_artifacts(run.info.run_id)]
    local = client.download_artifacts(run.info.run_id, "config.json")
    with open(local) as handle:
        config = json.load(handle)
    return {
        "status": run.info.status,
        "params": run.data.params,
        "artifacts": artifacts,
        "config": config,
        "history": history,
    }


def test_a_local_run_holds_the_config_and_every_step(trackers, output_dir):
    sink = MlflowSink("rl-tests", "local-demo", trackers.CONFIG, output_dir)
    for step, metrics in trackers.STEPS.items():
        sink.log(metrics, step)
    sink.close()

    uri = (output_dir / "mlruns").as_uri()
    run = read_mlflow_run(uri, "rl-tests", "local-demo", trackers.KEYS.values())
    assert run["status"] == "FINISHED"
    assert run["artifacts"] == ["config.json"] and run["config"] == trackers.CONFIG
    assert run["params"] == {
        "actor.optim.lr": "0.001",
        "actor.optim.betas": "[0.9, 0.999]",
        "trainer.seed": "7",
    }
    trackers.assert_same(run["history"])


def test_make_tracker_sends_the_run_config_to_mlflow(trackers, output_dir):
    config = load_config(
        overrides=[
            f"trainer.output_dir={output_dir}",
            "trainer.logger=[jsonl,mlflow]",
            "trainer.project_name=rl-tests",
            "trainer.experiment_name=tracker-demo",
        ]
    )
    tracker = make_tracker(config, output_dir, total_steps=3)
    for step, metrics in trackers.STEPS.items():
        tracker.log(metrics, step)
    tracker.close()

    uri = (output_dir / "mlruns").as_uri()
    run = read_mlflow_run(uri, "rl-tests", "tracker-demo", trackers.KEYS.values())
    assert run["config"] == json.loads(json.dumps(to_dict(config)))
    assert run["params"]["actor.optim.lr"] == str(config.actor.optim.lr)
    assert run["params"]["trainer.logger"] == "['jsonl', 'mlflow']"
    assert len(run["params"]) > 100  # more than one log_batch call's worth
    trackers.assert_same(run["history"])


def test_mlflow_tracking_uri_from_the_user_wins(trackers, tmp_path, output_dir, monkeypatch):
    uri = (tmp_path / "team-store").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    for name in ("first", "second"):  # the second run finds the experiment the first made
        sink = MlflowSink("rl-tests", name, trackers.CONFIG, output_dir)
        sink.log(trackers.STEPS[1], 1)
        sink.close()
    assert list(output_dir.iterdir()) == []
    for name in ("first", "second"):
        run = read_mlflow_run(uri, "rl-tests", name, trackers.KEYS.values())
        trackers.assert_same(run["history"], {1: trackers.STEPS[1]})


def test_mlflow_refuses_the_raw_names_the_sink_renames(output_dir, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=(output_dir / "mlruns").as_uri())
    run_id = client.create_run(client.create_experiment("raw")).info.run_id
    for name in ("pass@4/gsm8k", "score/(mean)", "/leading", "a//b"):
        with pytest.raises(MlflowException):
            client.log_metric(run_id, name, 1.0, step=1)


def test_config_flattens_to_mlflow_params():
    config = {"a": {"b": 1, "c": {}, "d": {"e@f": None, "..": 2, "x/y": [1]}}, "g": "x" * 7000}
    assert mlflow_params(config) == {
        "a.b": "1",
        "a.c": "{}",
        "a.d.e_f": "None",
        "a.d._": "2",
        "a.d.x_y": "[1]",
        "g": "x" * 6000,
    }
