"""MyJob without the window: source -> map -> key_by -> rolling reduce -> sink.

The runtime issue's reference job. Records are (sensor, value); the reduce keeps a
running sum per sensor and emits it on every record; the sink prints each sensor's sum
once it is complete (the running sums before it depend on how the two source subtasks
interleave, the complete one does not: the same lines on weir and on Apache Flink).

    weir run examples/keyed_sum.py --parallelism 2 --taskmanagers 2
"""

from __future__ import annotations

from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.number_seq import NumberSequenceSource

SENSORS = 10
PAIR = Types.TUPLE([Types.STRING(), Types.LONG()])


def build(env: StreamExecutionEnvironment, events: int = 200_000) -> None:
    totals = {f"sensor-{k}": sum(range(k, events + 1, SENSORS)) for k in range(SENSORS)}
    numbers = env.from_source(NumberSequenceSource(1, events), WatermarkStrategy.no_watermarks(), "numbers")
    (
        numbers.map(lambda n: (f"sensor-{n % SENSORS}", n), output_type=PAIR)
        .key_by(lambda pair: pair[0], key_type=Types.STRING())
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("running-sum")
        .filter(lambda pair: pair[1] == totals[pair[0]])
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
