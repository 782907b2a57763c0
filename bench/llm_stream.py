"""Cost of the LLM provider layer per streamed delta.

    python -m bench.llm_stream [--streams 20] [--seconds 4] [--rate 125] [--concurrent-only]

1. scripted provider at zero delay: µs per delta, against a bare generator that
   yields the same number of StreamEvents (ratio = the layer's own overhead);
2. long outputs: a 1 MB text in 4-character deltas and a 256 KB tool argument in
   64-character deltas (appending and partial JSON parsing stay linear);
3. anthropic, openai and openai-responses over a local wire server: µs per delta through SDK + helper
   thread + builder, against iterating the same SDK stream directly;
4. CPU per reply of 20 concurrent Anthropic streams of 500 deltas each from
   ``bench/fake_provider.py`` (its own process, 125 deltas a second): the process's CPU
   (every thread's) through the layer, against the SDK alone (its event models).
Nothing is asserted; figures are printed.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runtime.llm import LlmRequest, ModelSpec, StreamEvent, stream  # noqa: E402
from runtime.llm.clients import anthropic_client, openai_client  # noqa: E402


def best_of(runs: int, fn) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def request(text: str = "go") -> LlmRequest:
    return LlmRequest("bench", [{"role": "user", "content": text}], [])


def scripted(rules: dict) -> ModelSpec:
    return ModelSpec("scripted", "bench", "scripted", prices={"input": 1, "output": 1}, options={"rules": rules})


def bench_scripted() -> None:
    text = "lorem ipsum dolor sit amet " * 740  # ~20 KB
    rules = {
        "chunk_size": 4,
        "default": {
            "reply": [
                {"thinking": text[:4000]},
                {"text": text},
                {"tool_call": {"name": "write", "arguments": {"path": "a.txt", "content": text[:2000]}}},
            ]
        },
    }
    model = scripted(rules)
    deltas = sum(1 for e in stream(model, request()) if e.type.endswith("_delta"))

    def run_layer():
        for _ in stream(model, request()):
            pass

    pieces = [text[i : i + 4] for i in range(0, deltas * 4, 4)]
    partial: dict = {}

    def run_bare():
        for piece in pieces:
            yield StreamEvent("text_delta", 0, piece, partial)

    def drain_bare():
        for _ in run_bare():
            pass

    layer = best_of(5, run_layer)
    bare = best_of(5, drain_bare)
    print(f"scripted, zero delay: {deltas} deltas in {layer * 1000:.1f} ms = {layer / deltas * 1e6:.2f} µs/delta")
    print(f"  bare generator of the same events: {bare / deltas * 1e6:.2f} µs/delta (ratio {layer / bare:.1f}x)")


def bench_long_outputs() -> None:
    big_text = "x" * (1024 * 1024)
    model = scripted({"chunk_size": 4, "default": {"reply": [{"text": big_text}]}})
    seconds = best_of(3, lambda: [None for _ in stream(model, request())])
    print(f"1 MB text in 4-char deltas: {seconds * 1000:.0f} ms ({seconds / (len(big_text) / 4) * 1e6:.2f} µs/delta)")

    half = "y" * (128 * 1024)
    small = scripted({"chunk_size": 64, "default": {"reply": [{"tool_call": {"name": "write", "arguments": {"path": "p", "content": half}}}]}})
    large = scripted({"chunk_size": 64, "default": {"reply": [{"tool_call": {"name": "write", "arguments": {"path": "p", "content": half * 2}}}]}})
    t_small = best_of(3, lambda: [None for _ in stream(small, request())])
    t_large = best_of(3, lambda: [None for _ in stream(large, request())])
    print(
        f"tool arguments in 64-char deltas: 128 KB {t_small * 1000:.0f} ms, 256 KB {t_large * 1000:.0f} ms "
        f"(ratio {t_large / t_small:.2f}; 2.0 = linear)"
    )


def bench_wire() -> None:
    from tests.support.wire_servers import Reply, WireServer

    text = "streaming text over the wire " * 300  # ~8.7 KB
    for protocol, kind in (("anthropic", "anthropic"), ("openai", "openai"), ("openai-responses", "openai-responses")):
        with WireServer(protocol) as server:
            model = ModelSpec(kind, "bench", kind, base_url=server.base_url, api_key="k")
            reply_args = {"content": [{"type": "text", "text": text}], "chunk": 4}
            deltas = len(text) // 4 + (1 if len(text) % 4 else 0)

            def run_layer():
                server.script(Reply(**reply_args))
                for _ in stream(model, request()):
                    pass

            def run_sdk():
                server.script(Reply(**reply_args))
                if kind == "anthropic":
                    client = anthropic_client(base_url=server.base_url, api_key="k")
                    events = client.messages.create(model="bench", max_tokens=10, messages=[{"role": "user", "content": "go"}], stream=True)
                elif kind == "openai-responses":
                    client = openai_client(base_url=server.base_url, api_key="k")
                    events = client.responses.create(model="bench", input="go", stream=True)
                else:
                    client = openai_client(base_url=server.base_url, api_key="k")
                    events = client.chat.completions.create(
                        model="bench", messages=[{"role": "user", "content": "go"}], stream=True, stream_options={"include_usage": True}
                    )
                for _ in events:
                    pass

            run_layer()
            run_sdk()  # warm both paths
            layer = statistics.median(best_of(1, run_layer) for _ in range(5))
            sdk = statistics.median(best_of(1, run_sdk) for _ in range(5))
            print(
                f"{protocol} wire, {deltas} deltas: layer {layer / deltas * 1e6:.1f} µs/delta, "
                f"SDK alone {sdk / deltas * 1e6:.1f} µs/delta (layer adds {(layer - sdk) / deltas * 1e6:.1f} µs/delta)"
            )


def bench_wire_concurrent(streams: int = 20, seconds: float = 4.0, rate: float = 125.0, pace: float | None = None) -> None:
    import resource
    import subprocess
    import threading

    provider = subprocess.Popen(
        [sys.executable, "-m", "bench.fake_provider", "--port", "0", "--seconds", str(seconds), "--rate", str(rate)],
        stdout=subprocess.PIPE, text=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )  # fmt: skip
    try:
        base_url = f"http://127.0.0.1:{int(provider.stdout.readline().split()[1])}"
        model = ModelSpec("anthropic", "bench", "anthropic", base_url=base_url, api_key="k")

        def through_layer():
            from runtime.llm.transport import read_pace

            token = read_pace.set(None if pace is None else (lambda: pace))  # as a busy runs worker's turns read
            try:
                for _ in stream(model, request(), cancel=threading.Event()):  # a turn always passes its cancel event
                    pass
            finally:
                read_pace.reset(token)

        def sdk_alone():
            client = anthropic_client(base_url=base_url, api_key="k")
            for _ in client.messages.create(model="bench", max_tokens=10, messages=[{"role": "user", "content": "go"}], stream=True):
                pass

        def cpu_per_reply(fn) -> float:
            threads = [threading.Thread(target=fn) for _ in range(streams)]
            usage = resource.getrusage(resource.RUSAGE_SELF)
            before = usage.ru_utime + usage.ru_stime
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            usage = resource.getrusage(resource.RUSAGE_SELF)
            return (usage.ru_utime + usage.ru_stime - before) / streams

        through_layer()
        sdk_alone()  # warm both paths
        layer = statistics.median(cpu_per_reply(through_layer) for _ in range(3))
        sdk = statistics.median(cpu_per_reply(sdk_alone) for _ in range(3))
        deltas = int(seconds * rate)
        print(
            f"anthropic wire, {streams} concurrent streams of {deltas} deltas{'' if pace is None else f' read at a {pace:g} s pace'}: "
            f"layer {layer * 1000:.1f} ms CPU a reply "
            f"({layer / deltas * 1e6:.0f} µs/delta), SDK alone {sdk * 1000:.1f} ms; load average {os.getloadavg()[0]:.1f}"
        )
    finally:
        provider.terminate()
        provider.wait()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Cost of the LLM provider layer per streamed delta.")
    parser.add_argument("--streams", type=int, default=20, help="concurrent Anthropic streams in part 4")
    parser.add_argument("--seconds", type=float, default=4.0, help="how long each of them streams")
    parser.add_argument("--rate", type=float, default=125.0, help="their deltas a second")
    parser.add_argument("--pace", type=float, default=None, help="read part 4's streams at this pace (seconds), as a busy runs worker does")
    parser.add_argument("--concurrent-only", action="store_true", help="run part 4 alone")
    args = parser.parse_args()
    if not args.concurrent_only:
        bench_scripted()
        bench_long_outputs()
        bench_wire()
    bench_wire_concurrent(args.streams, args.seconds, args.rate, args.pace)
