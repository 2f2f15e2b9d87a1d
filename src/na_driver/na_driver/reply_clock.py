"""A servo's Realtime Tick mapped onto the host clock, to tell a fresh reply from a late one (ROS-free).

Realtime Tick (XM430 address 120) is the servo's own millisecond clock (0 .. 32767, then 0
again; ROBOTIS e-manual). A reply carries the tick at which the servo served the read. If the
servo clock runs at host time minus an offset ``c``, the reply was sampled at host time
``tick + c + q`` with ``0 <= q < 1 ms`` (the tick counts whole milliseconds).

Every reply, fresh or late, was sampled before it was received, so ``received - tick`` is an
upper bound of ``c``; the smallest one seen (:attr:`ServoClock.offset_ms`, allowed to creep up at
``drift`` to follow a servo clock that runs slow) bounds ``c`` from above. Then

* the reply was sampled no later than ``tick + 1 ms + offset``; if that is before the request
  was sent, it cannot answer this request: "late". A fresh reply is never called late (its
  sample time is after the request, and the bound is above its sample time);
* a tick older than the last accepted one is late too (the servo serves requests in order);
* a tick that puts the sample more than ``future_slack_s`` after the reply's arrival is
  "implausible" (a corrupted packet whose CRC happened to match) and teaches the clock nothing,
  unless the next reply is ahead of the bound by the same amount: then the bound itself was loose
  (the reply that set it waited in the host before it was read, as the first reply after a busy
  start-up can), and the tighter bound the two replies agree on replaces it. Without that, one
  late first reply would have every later reply called implausible for as long as the driver runs.

The creep is a trade-off: it lets the bound follow a slow servo clock, but while only late replies
arrive it loosens the bound by ``drift`` x elapsed time (1 ms per second at the default 0.1 %,
far above a crystal's tens of ppm). A servo clock slower than that would make fresh replies look
late: counted and stale, never wrong.

A late reply sampled less than about 1 ms (tick resolution plus the shortest transit time)
before the request cannot be told apart this way; the transaction tags of
:class:`na_driver.dxl_bus.DxlBus` reject the replies to the previous Sync Reads by length.
"""

from __future__ import annotations

TICK_WRAP_MS = 32768              # e-manual: Realtime Tick 0 .. 32767 ms
TICK_RESOLUTION_MS = 1.0
DEFAULT_DRIFT = 0.001             # servo clock may run up to 0.1 % (1000 ppm) slower than the host's
DEFAULT_FUTURE_SLACK_S = 0.010

LATE = "late"
IMPLAUSIBLE = "implausible"


class ServoClock:
    """Judges the replies of one servo by their Realtime Tick; :meth:`reset` after a reboot or reconnect."""

    def __init__(self, drift: float = DEFAULT_DRIFT, future_slack_s: float = DEFAULT_FUTURE_SLACK_S) -> None:
        if drift < 0 or future_slack_s <= 0:
            raise ValueError("drift must be >= 0 and future_slack_s > 0")
        self.drift = drift
        self.future_slack_ms = future_slack_s * 1000.0
        self.reset()

    def reset(self) -> None:
        self.offset_ms: float | None = None    # upper bound of host ms - servo ms (unwrapped ticks)
        self._offset_at = 0.0                   # host ms when the bound was last lowered or crept
        self._last_tick: float | None = None    # unwrapped tick of the last accepted reply
        self._ahead: float | None = None        # the bound an implausible reply alone would have set

    def judge(self, tick: int, sent_at: float, received_at: float) -> str | None:
        """None if a reply with ``tick``, received at ``received_at``, may answer a request sent at ``sent_at``
        (both ``time.monotonic()`` seconds); else :data:`LATE` or :data:`IMPLAUSIBLE`."""
        sent_ms, received_ms = sent_at * 1000.0, received_at * 1000.0
        if self.offset_ms is None:             # the first reply defines the clock
            self.offset_ms, self._offset_at, self._last_tick = received_ms - tick, received_ms, float(tick)
            return None
        offset = self.offset_ms + self.drift * max(received_ms - self._offset_at, 0.0)
        servo_now = received_ms - offset       # the servo's (unwrapped) time about now
        unwrapped = tick + TICK_WRAP_MS * round((servo_now - tick) / TICK_WRAP_MS)
        if unwrapped + offset > received_ms + self.future_slack_ms:
            candidate = received_ms - unwrapped
            earlier, self._ahead = self._ahead, candidate
            if earlier is None or abs(candidate - earlier) > self.future_slack_ms:
                return IMPLAUSIBLE
            offset = min(candidate, earlier)   # two in a row agree: the old bound was loose, not the ticks wrong
        self._ahead = None
        self.offset_ms, self._offset_at = min(offset, received_ms - unwrapped), received_ms
        if unwrapped + TICK_RESOLUTION_MS + self.offset_ms < sent_ms:
            return LATE
        if self._last_tick is not None and unwrapped < self._last_tick:
            return LATE
        self._last_tick = unwrapped
        return None
