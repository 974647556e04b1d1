"""``Duration`` and ``Time``, as in ``pyflink.common``. Both are whole milliseconds here."""

from __future__ import annotations

from weir.errors import UsageError


class Duration:
    """A span of time, stored in milliseconds (weir's time resolution)."""

    __slots__ = ("_millis",)

    def __init__(self, millis: int) -> None:
        if not isinstance(millis, int) or isinstance(millis, bool):
            raise UsageError(f"Duration needs whole milliseconds, got {millis!r}")
        self._millis = millis

    @staticmethod
    def of_nanos(nanos: int) -> Duration:
        return Duration(nanos // 1_000_000)

    @staticmethod
    def of_millis(millis: int) -> Duration:
        return Duration(millis)

    @staticmethod
    def of_seconds(seconds: int) -> Duration:
        return Duration(seconds * 1000)

    @staticmethod
    def of_minutes(minutes: int) -> Duration:
        return Duration(minutes * 60_000)

    @staticmethod
    def of_hours(hours: int) -> Duration:
        return Duration(hours * 3_600_000)

    @staticmethod
    def of_days(days: int) -> Duration:
        return Duration(days * 86_400_000)

    @staticmethod
    def zero() -> Duration:
        return Duration(0)

    def to_milliseconds(self) -> int:
        return self._millis

    def to_nanos(self) -> int:
        return self._millis * 1_000_000

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duration) and other._millis == self._millis

    def __hash__(self) -> int:
        return hash(("Duration", self._millis))

    def __repr__(self) -> str:
        return f"Duration({self._millis} ms)"


class Time:
    """Flink's legacy ``Time`` (window sizes), kept because the seeds' jobs use it."""

    __slots__ = ("_millis",)

    def __init__(self, millis: int) -> None:
        if not isinstance(millis, int) or isinstance(millis, bool):
            raise UsageError(f"Time needs whole milliseconds, got {millis!r}")
        self._millis = millis

    @staticmethod
    def milliseconds(milliseconds: int) -> Time:
        return Time(milliseconds)

    @staticmethod
    def seconds(seconds: int) -> Time:
        return Time(seconds * 1000)

    @staticmethod
    def minutes(minutes: int) -> Time:
        return Time(minutes * 60_000)

    @staticmethod
    def hours(hours: int) -> Time:
        return Time(hours * 3_600_000)

    @staticmethod
    def days(days: int) -> Time:
        return Time(days * 86_400_000)

    def to_milliseconds(self) -> int:
        return self._millis

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Time) and other._millis == self._millis

    def __hash__(self) -> int:
        return hash(("Time", self._millis))

    def __repr__(self) -> str:
        return f"Time({self._millis} ms)"


class Instant:
    """A point on the time line: ``seconds`` since the epoch and ``nanos`` (0..999,999,999)
    into that second, as ``pyflink.common.Instant`` (Java's Instant); ``Types.INSTANT()``
    values."""

    __slots__ = ("nanos", "seconds")

    def __init__(self, seconds: int, nanos: int) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int):
            raise UsageError(f"Instant seconds must be an integer, got {seconds!r}")
        if isinstance(nanos, bool) or not isinstance(nanos, int) or not 0 <= nanos < 1_000_000_000:
            raise UsageError(f"Instant nanos must be an integer in 0..999999999, got {nanos!r}")
        self.seconds = seconds
        self.nanos = nanos

    def to_epoch_milli(self) -> int:
        return self.seconds * 1000 + self.nanos // 1_000_000

    @staticmethod
    def of_epoch_milli(epoch_milli: int) -> Instant:
        return Instant(epoch_milli // 1000, (epoch_milli % 1000) * 1_000_000)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Instant) and (self.seconds, self.nanos) == (other.seconds, other.nanos)

    def __hash__(self) -> int:
        return hash((self.seconds, self.nanos))

    def __repr__(self) -> str:
        return f"Instant<{self.seconds}, {self.nanos}>"


def to_millis(what: str, value: Duration | Time | int) -> int:
    """Accept a Duration, a Time or plain milliseconds; name ``what`` in the error."""
    if isinstance(value, (Duration, Time)):
        return value.to_milliseconds()
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise UsageError(f"{what} must be a Duration, a Time or milliseconds as int, got {value!r}")
