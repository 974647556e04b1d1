"""Issue 24's slow-function job: how long its checkpoints take (buffer debloating).

A number sequence at parallelism 2 → a map taking 0.2 ms a record (a sleep of 4 ms every
20 records: a user function calling a model or a service) → key_by → a running reduce →
an exactly-once FileSink, checkpointing every 200 ms. Prints each checkpoint of the run
from ``_history.jsonl`` in the checkpoint directory (a temporary directory).

    python examples/slow_map.py                 # debloated source batches (the default)
    python examples/slow_map.py --no-debloat    # fixed batches of 4,096 records
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.file_system import Encoder, FileSink
from weir.datastream.connectors.number_seq import NumberSequenceSource

PAIR = Types.TUPLE([Types.LONG(), Types.LONG()])


def slow_map(n: int) -> tuple[int, int]:
    if n % 20 == 0:
        time.sleep(0.004)
    return (n % 100, n)


def main(debloat: bool) -> None:
    directory = Path(tempfile.mkdtemp(prefix="weir-slow-map-"))
    conf = Configuration()
    conf.set_string("execution.checkpointing.interval", "200 ms")
    conf.set_string("execution.checkpointing.dir", str(directory / "checkpoints"))
    conf.set_string("taskmanager.network.memory.buffer-debloat.enabled", str(debloat).lower())
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    (
        env.from_source(NumberSequenceSource(0, 59_999), WatermarkStrategy.no_watermarks(), "numbers")
        .map(slow_map, output_type=PAIR)
        .key_by(lambda r: r[0], key_type=Types.LONG())
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .sink_to(FileSink.for_row_format(str(directory / "out"), Encoder.simple_string_encoder()).build())
    )
    started = time.perf_counter()
    env.execute("slow map")
    print(f"ran {time.perf_counter() - started:.1f} s; checkpoints under {directory / 'checkpoints'}")
    for history in (directory / "checkpoints").rglob("_history.jsonl"):
        for line in history.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            print(
                f"checkpoint {record['checkpoint_id']:3d} {record['status']:9s} {record['duration_ms']:6d} ms"
            )


if __name__ == "__main__":
    main(debloat="--no-debloat" not in sys.argv[1:])
