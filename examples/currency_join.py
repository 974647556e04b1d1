"""Two inputs: orders priced with the latest exchange rate of their currency.

Orders (order_id, currency, amount) and rates (currency, rate) are connected and keyed
by currency; a KeyedCoProcessFunction keeps each currency's latest rate in keyed state
(shared by both inputs), converts the orders that come after it, and holds an order that
comes before any rate of its currency until one arrives.

    weir run examples/currency_join.py --parallelism 2
    weir plan examples/currency_join.py --level job
"""

from __future__ import annotations

from typing import Any

from weir.common import Types
from weir.datastream import KeyedCoProcessFunction, StreamExecutionEnvironment
from weir.datastream.state import ListStateDescriptor, ValueStateDescriptor

ORDER = Types.TUPLE([Types.LONG(), Types.STRING(), Types.DOUBLE()])
RATE = Types.TUPLE([Types.STRING(), Types.DOUBLE()])
PRICED = Types.TUPLE([Types.LONG(), Types.STRING(), Types.DOUBLE()])  # order id, currency, amount in EUR

CURRENCIES = ["USD", "GBP", "JPY", "CHF"]


class PriceInEuro(KeyedCoProcessFunction):
    """Input 1: orders; input 2: rates (units of the currency per euro)."""

    def open(self, runtime_context: Any) -> None:
        # descriptors and their types are made here, not at module level: PyFlink pickles the
        # function for its Python workers and cannot pickle a type the job has already used
        order = Types.TUPLE([Types.LONG(), Types.STRING(), Types.DOUBLE()])
        self.rate = runtime_context.get_state(ValueStateDescriptor("latest-rate", Types.DOUBLE()))
        self.waiting = runtime_context.get_list_state(ListStateDescriptor("waiting-orders", order))

    def process_element1(self, order: tuple[int, str, float], ctx: Any) -> Any:
        rate = self.rate.value()
        if rate is None:
            self.waiting.add(order)
        else:
            yield (order[0], order[1], round(order[2] / rate, 2))

    def process_element2(self, rate: tuple[str, float], ctx: Any) -> Any:
        self.rate.update(rate[1])
        for order in self.waiting.get() or []:
            yield (order[0], order[1], round(order[2] / rate[1], 2))
        self.waiting.clear()


def orders(n: int) -> list[tuple[int, str, float]]:
    return [(i, CURRENCIES[i % len(CURRENCIES)], float(10 + i % 90)) for i in range(n)]


RATES = [("USD", 1.08), ("GBP", 0.85), ("JPY", 162.0), ("CHF", 0.95)]


def build(env: StreamExecutionEnvironment, sink: Any = None, n: int = 1_000) -> None:
    priced = (
        env.from_collection(orders(n), type_info=ORDER)
        .connect(env.from_collection(RATES, type_info=RATE))
        .key_by(lambda o: o[1], lambda r: r[0], key_type=Types.STRING())
        .process(PriceInEuro(), output_type=PRICED)
        .name("price in euro")
        .uid("price-in-euro")
    )
    if sink is None:
        priced.filter(lambda p: p[0] % 250 == 0).print()
    else:
        priced.add_sink(sink)


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    build(env)
    env.execute("currency join")


if __name__ == "__main__":
    main()
