"""Predicts what a Python benchmark client reports, by simulating its loop as it runs.

The client is one event loop (`heisenbench sim`'s client: a send job, a job per streamed
chunk, a finish job, chunks stamped after the loop processed them) in front of a server
with no latency. Its costs come from audits (bench/audit/RESULTS.md, "Per request and per
chunk"): A seconds of CPU per request, B per chunk, and SHARE, the part of A spent before
the request leaves (the rest when it finishes). TTFT is counted from the start of the send
job, where SGLang's and vLLM's benches start their clock (the top of the request's
coroutine), so the send job's own time is inside it.

usage: python3 simulate.py HEISENBENCH A B SHARE RATE:TOKENS [RATE:TOKENS ...]
prints, per point, the predicted mean, p50, p90 and p99 of the reported TTFT and the rate
the loop achieved.
"""

import json
import subprocess
import sys
import tempfile


def scenario(rate, tokens, a, b, share):
    cost = lambda s: {"kind": "gamma", "mean_s": max(s, 1e-9), "scv": 1e-4}
    return {
        "name": "python client",
        "seed": 1,
        "workload": {
            "arrivals": {"kind": "poisson", "rate_per_s": rate},
            "stop": {"kind": "duration", "seconds": 200.0},
            "input_tokens": {"kind": "fixed", "tokens": 16},
            "output_tokens": {"kind": "fixed", "tokens": tokens},
        },
        "client": {
            "workers": 1,
            "policy": "round_robin",
            "costs": {"send": cost(a * share), "chunk": cost(b), "finish": cost(a * (1 - share))},
            "stamp": "after_processing",
            "send_shares_loop": True,
        },
        "server": {
            "time_to_first_token_s": 0.0,
            "time_to_first_token_std_dev_s": 0.0,
            "prefill_overhead_s": 0.0,
            "prefill_time_per_token_s": 0.0,
            "inter_token_latency_s": 0.0,
            "inter_token_latency_std_dev_s": 0.0,
            "max_num_seqs": 100000,
            "max_waiting_queue_length": 100000,
            "time_factor_under_load": 1.0,
        },
    }


def main():
    hb, a, b, share = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    for point in sys.argv[5:]:
        rate, tokens = point.split(":")
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(scenario(float(rate), int(tokens), a, b, share), f)
            f.flush()
            out = subprocess.run([hb, "sim", f.name, "--json"], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout)["runs"][0]
        t = r["ttft"]["from_actual"]
        ms = lambda k: f"{(t[k] + a * share) * 1e3:.2f}"
        print(f"{rate} req/s x {tokens}: reported TTFT mean {ms('mean_s')} p50 {ms('p50_s')} "
              f"p90 {ms('p90_s')} p99 {ms('p99_s')} ms; achieved {r['achieved_qps']:.1f} req/s")


if __name__ == "__main__":
    main()
