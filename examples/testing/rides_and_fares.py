"""A KeyedCoProcessFunction to test: Flink's "stateful enrichment" exercise in weir.

Two streams describe taxi rides: rides (ride_id, driver) and fares (ride_id, fare). They
are connected and keyed by ride id; whichever of a ride and its fare comes first waits in
keyed state for the other, and the pair goes out as (ride_id, driver, fare). A ride or a
fare still waiting a minute of event time later goes to a side output: an event-time timer
set when it arrived fires once both inputs' watermarks have passed it.
"""

from __future__ import annotations

from typing import Any

from weir.common import Types
from weir.datastream import KeyedCoProcessFunction, OutputTag
from weir.datastream.state import ValueStateDescriptor

RIDE_TYPE = Types.TUPLE([Types.LONG(), Types.STRING()])
FARE_TYPE = Types.TUPLE([Types.LONG(), Types.DOUBLE()])
ENRICHED_TYPE = Types.TUPLE([Types.LONG(), Types.STRING(), Types.DOUBLE()])

RIDE = ValueStateDescriptor("ride", RIDE_TYPE)
FARE = ValueStateDescriptor("fare", FARE_TYPE)
UNMATCHED_RIDES = OutputTag("unmatched-rides", RIDE_TYPE)
UNMATCHED_FARES = OutputTag("unmatched-fares", FARE_TYPE)
WAIT_MS = 60_000


class EnrichRides(KeyedCoProcessFunction):
    """Input 1: rides; input 2: fares; both keyed by ride id. Output: (ride_id, driver, fare)."""

    def open(self, runtime_context: Any) -> None:
        self.ride = runtime_context.get_state(RIDE)
        self.fare = runtime_context.get_state(FARE)

    def process_element1(self, ride: tuple[int, str], ctx: Any) -> Any:
        fare = self.fare.value()
        if fare is not None:
            self.fare.clear()
            yield (ride[0], ride[1], fare[1])
        else:
            self.ride.update(ride)
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + WAIT_MS)

    def process_element2(self, fare: tuple[int, float], ctx: Any) -> Any:
        ride = self.ride.value()
        if ride is not None:
            self.ride.clear()
            yield (ride[0], ride[1], fare[1])
        else:
            self.fare.update(fare)
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + WAIT_MS)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        if self.ride.value() is not None:
            ctx.output(UNMATCHED_RIDES, self.ride.value())
        if self.fare.value() is not None:
            ctx.output(UNMATCHED_FARES, self.fare.value())
        self.ride.clear()
        self.fare.clear()


def build(rides: Any, fares: Any) -> tuple[Any, Any, Any]:
    """The job's streams: enriched rides, and the rides and fares that found no partner."""
    enriched = (
        rides.connect(fares)
        .key_by(lambda r: r[0], lambda f: f[0], key_type=Types.LONG())
        .process(EnrichRides(), output_type=ENRICHED_TYPE)
        .uid("enrich-rides")
    )
    return enriched, enriched.get_side_output(UNMATCHED_RIDES), enriched.get_side_output(UNMATCHED_FARES)
