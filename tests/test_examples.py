"""Every example runs (local mode here; tests/spark/test_examples_spark.py runs the Spark modes)."""
import importlib.util
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ad_click_join_reports_ctr_per_campaign_and_minute(capsys):
    example = load("ad_click_join")
    assert example.main(["--impressions", "300"]) == 0
    out = capsys.readouterr().out
    assert "free-shipping" in out and "clicks beyond the watermark (dropped, counted)" in out
    impressions, clicks = example.generate(300)
    result = example.run_local(impressions, clicks)
    # Brute force: the watermark batch i sees is min over both inputs of (largest event time of
    # batches < i) - 10 s; a click is dropped when that has passed its minute's end; a kept click
    # counts for its impression when both fall in the same minute.
    minute_of = lambda ts: ts - (ts - example.START) % example.MINUTE  # noqa: E731
    left_batches, right_batches = example.arrival_batches(impressions), example.arrival_batches(clicks)
    seen = {"left": None, "right": None}
    kept_clicks, dropped = {}, 0
    for lefts, rights in zip(left_batches, right_batches):
        marks = [float("-inf") if seen[s] is None else seen[s] - 10_000 for s in seen]
        watermark = min(marks)
        for click in rights:
            if watermark >= minute_of(click["ts"]) + example.MINUTE - 1:
                dropped += 1
            else:
                kept_clicks[click["ad_id"]] = click["ts"]
        for side, rows in (("left", lefts), ("right", rights)):
            if rows:
                top = max(r["ts"] for r in rows)
                seen[side] = top if seen[side] is None else max(seen[side], top)
    shown: dict = {}
    for imp in impressions:
        minute = minute_of(imp["ts"])
        clicked = imp["ad_id"] in kept_clicks and minute_of(kept_clicks[imp["ad_id"]]) == minute
        shown.setdefault((imp["campaign"], minute), []).append(1.0 if clicked else 0.0)
    assert result["ctr"] == {k: sum(v) / len(v) for k, v in shown.items()}
    assert result["late_clicks"] == dropped > 0
