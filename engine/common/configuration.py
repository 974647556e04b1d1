"""``Configuration``: string keys to values, as in ``pyflink.common.Configuration``.

Known keys (``weir.common.config_options``) are validated when set, so a malformed
value fails where it was written, not deep inside a running job. Unknown keys are kept
as they are, as Flink keeps them.
"""

from __future__ import annotations

import base64
import builtins
from collections.abc import Iterator
from typing import Any

from weir.common.config_options import ConfigOption, option_for
from weir.errors import UsageError


class Configuration:
    def __init__(self, other: Configuration | None = None) -> None:
        self._data: dict[str, str] = dict(other._data) if other is not None else {}

    # -- raw access --------------------------------------------------------------------------
    def set_string(self, key: str, value: str) -> Configuration:
        option = option_for(key)
        if option is not None:
            option.parse(value)  # validate early; stored as written
        self._data[key] = str(value)
        return self

    def get_string(self, key: str, default_value: str | None = None) -> str | None:
        return self._data.get(key, default_value)

    def set_integer(self, key: str, value: int) -> Configuration:
        return self.set_string(key, str(int(value)))

    def get_integer(self, key: str, default_value: int = 0) -> int:
        return int(self._data[key]) if key in self._data else default_value

    def set_boolean(self, key: str, value: bool) -> Configuration:
        return self.set_string(key, "true" if value else "false")

    def get_boolean(self, key: str, default_value: bool = False) -> bool:
        if key not in self._data:
            return default_value
        return self._data[key].strip().lower() in ("true", "1", "yes", "on")

    def set_float(self, key: str, value: float) -> Configuration:
        return self.set_string(key, repr(float(value)))

    def get_float(self, key: str, default_value: float = 0.0) -> float:
        return float(self._data[key]) if key in self._data else default_value

    def set(self, key: str, value: Any) -> Configuration:
        """weir's convenience: set any value (bool, int, str, Duration)."""
        if isinstance(value, bool):
            return self.set_boolean(key, value)
        if hasattr(value, "to_milliseconds"):
            return self.set_string(key, f"{value.to_milliseconds()} ms")
        return self.set_string(key, str(value))

    def contains_key(self, key: str) -> bool:
        return key in self._data

    def remove_config(self, key: str) -> bool:
        return self._data.pop(key, None) is not None

    def key_set(self) -> builtins.set[str]:
        return set(self._data)

    def add_all(self, other: Configuration, prefix: str | None = None) -> Configuration:
        for k, v in other._data.items():
            self.set_string(k if prefix is None else prefix + k, v)
        return self

    def add_all_to_dict(self, target_dict: dict[str, Any]) -> None:
        """Put every entry of this configuration into ``target_dict``."""
        target_dict.update(self._data)

    def set_bytearray(self, key: str, value: bytes | bytearray) -> Configuration:
        """Bytes, kept as base64 text (the configuration holds strings, as Flink's)."""
        return self.set_string(key, base64.b64encode(bytes(value)).decode("ascii"))

    def get_bytearray(self, key: str, default_value: bytearray | None = None) -> bytearray | None:
        text = self._data.get(key)
        if text is None:
            return default_value
        try:
            return bytearray(base64.b64decode(text, validate=True))
        except ValueError:
            raise UsageError(
                f"configuration key '{key}' holds {text!r}, not bytes set with set_bytearray"
            ) from None

    @staticmethod
    def parse_list_value(value: str) -> list[str]:
        """A list option's items: ``a;b;c`` (Flink's separator), or a YAML-style ``[a, b]``."""
        if not value:
            return []
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            return [item.strip().strip("'\"") for item in text[1:-1].split(",") if item.strip()]
        return value.split(";")

    def to_dict(self) -> dict[str, str]:
        return dict(self._data)

    @staticmethod
    def from_dict(values: dict[str, Any]) -> Configuration:
        conf = Configuration()
        for k, v in values.items():
            conf.set(k, v)
        return conf

    # -- typed access through the option registry ---------------------------------------------
    def get_option(self, option: ConfigOption) -> Any:
        """The typed value of ``option``, honouring its deprecated fallback keys."""
        for key in (option.key, *option.fallback_keys):
            if key in self._data:
                return option.parse(self._data[key])
        return option.default

    def has_option(self, option: ConfigOption) -> bool:
        return any(k in self._data for k in (option.key, *option.fallback_keys))

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Configuration) and other._data == self._data

    def __repr__(self) -> str:
        return f"Configuration({self._data!r})"
