"""MyJob without the window: source -> map -> key_by -> rolling reduce -> sink.

The runtime issue's reference job. Records are (sensor, value); the reduce keeps a
running sum per sensor and emits it on every record.

    weir run examples/keyed_sum.py --parallelism 2 --taskmanagers 2
"""

from __future__ import annotations

from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.number_seq import NumberSequenceSource

SENSORS = 10
PAIR = Types.TUPLE([Types.STRING(), Types.LONG()])


def build(env: StreamExecutionEnvironment, events: int = 200_000) -> None:
    numbers = env.from_source(NumberSequenceSource(1, events), WatermarkStrategy.no_watermarks(), "numbers")
    (
        numbers.map(lambda n: (f"sensor-{n % SENSORS}", n), output_type=PAIR)
        .key_by(lambda pair: pair[0], key_type=Types.STRING())
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("running-sum")
        .filter(lambda pair: pair[1] > 19_999_000_000)
        .print()
        .set_parallelism(1)
    )


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    build(env)
    env.execute("keyed sum")


if __name__ == "__main__":
    main()
