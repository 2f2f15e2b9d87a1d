"""The estimator on the simulated rig with a model trained in the test setup: generated payload
episodes -> NAD -> MJX training -> ONNX -> estimator node beside the rig, arm drivers and teleop
(separate processes, real DDS). Its published force must track the rig's ground truth better than
always predicting zero, and stale follower states must never become estimates."""

from __future__ import annotations

import argparse

import pytest

from na_bringup.demo import Demo, build_parser

LIVE_PAYLOAD_GRAMS = 400.0     # not among the training payloads (200, 300, 500 g)
TRAIN_STEPS = 600


@pytest.mark.system
@pytest.mark.slow
def test_trained_estimator_tracks_payload_force_on_the_rig(tmp_path, capsys) -> None:
    args: argparse.Namespace = build_parser().parse_args([
        "--out", str(tmp_path / "run"), "--episodes", "2", "--train-steps", str(TRAIN_STEPS),
        "--live-seconds", "15", "--quick"])
    demo = Demo(args, tasks=["payload", "free"], payloads="200,300,500",
                live_phases=(("go_up_stay", LIVE_PAYLOAD_GRAMS),))
    demo.logs.mkdir(parents=True)
    nad = demo.convert([demo.generate()])
    model = demo.export(demo.train(nad), nad)
    results = demo.estimate_live(model)
    score, _data = results[f"go_up_stay_{LIVE_PAYLOAD_GRAMS:g}g"]
    with capsys.disabled():
        print("\n" + "\n".join(score.lines()))
    assert score.matched > 0.9 * score.estimates > 500
    assert score.force_mae < 0.8 * score.zero_force_mae, "the estimate does not beat always-zero"
    assert demo.stale_injected > 0
    assert demo.stale_estimated == 0, "an estimate was published from a stale follower state"
