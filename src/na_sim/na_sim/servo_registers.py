"""Control-table memory of one emulated DYNAMIXEL XM430-W350 (Protocol 2.0).

ROS-free. The layout, defaults, ranges and access rights come from ``na_description.xm430``
(ROBOTIS e-manual; docs/REFERENCES.md, XM430-W350); this module adds the servo's rules for protocol access:

* reads may span reserved bytes inside the 256-byte table (they read 0); past the end -> Access Error;
* writes must cover whole registers (a partial register -> Data Length Error), must not touch a
  read-only or reserved byte (Access Error), must keep every value inside the register's range
  and Operating Mode one of the XM430's modes (Data Range Error) and, in Position Mode, Goal
  Position inside the position limits; Goal PWM / Current / Velocity inside PWM / Current /
  Velocity Limit (Data Limit Error);
* EEPROM (addresses < 64) is locked while Torque Enable is 1 (Access Error);
* a multi-register write is checked completely before any byte changes (all or none);
* Indirect Data N reads/writes the byte at Indirect Address N (e-manual "Indirect Address");
* while a Hardware Error (shutdown) is latched, writing Torque Enable = 1 is accepted but has no
  effect; only a Reboot recovers (e-manual "Shutdown");
* Bus Watchdog (address 98, firmware 38+, e-manual "Bus Watchdog"): with Torque Enable on and a
  value of 1..127, a servo that receives no instruction packet for value x 20 ms stops and the
  register reads -1; while it reads -1 the goal registers (Goal PWM, Current, Velocity, Position)
  refuse writes with a Data Range Error, and writing 0 clears the error. Choices where the manual
  is silent: only instruction packets addressed to this servo (its ID, the broadcast ID, or a
  Sync/Bulk instruction listing it) count as communication; "stops" holds the present state
  (Goal Position := Present Position in the position modes, Goal Velocity / PWM / Current := 0 in
  their modes) with Profile Velocity and Acceleration set to 0, torque stays on; while expired,
  only 0 may be written to Bus Watchdog. On firmware older than 38 address 98 refuses writes
  (Access Error).
"""

from __future__ import annotations

import struct
import threading

from na_description import xm430

Register = xm430.Register

# Protocol 2.0 error numbers of the status packet ERR byte (xm430.STATUS_ERRORS).
RESULT_FAIL = 1
INSTRUCTION_ERROR = 2
CRC_ERROR = 3
DATA_RANGE_ERROR = 4
DATA_LENGTH_ERROR = 5
DATA_LIMIT_ERROR = 6
ACCESS_ERROR = 7

EEPROM_END = xm430.REGISTERS["torque_enable"].address      # 64: first RAM address
_TORQUE_ENABLE = xm430.REGISTERS["torque_enable"]
_INDIRECT_ADDRESS_1 = xm430.REGISTERS["indirect_address_1"].address
_INDIRECT_DATA_1 = xm430.REGISTERS["indirect_data_1"].address
_INDIRECT_COUNT = 28
_INDIRECT_ADDRESSES = struct.Struct(f"<{_INDIRECT_COUNT}H")   # Indirect Address 1..28, 2 bytes each
_BUS_WATCHDOG = xm430.REGISTERS["bus_watchdog"]
_ID_ADDRESS = xm430.REGISTERS["id"].address
_GOAL_REGISTERS = ("goal_pwm", "goal_current", "goal_velocity", "goal_position")
_POSITION_MODES = (3, 4, 5)
_HOLD_ON_WATCHDOG = {1: "goal_velocity", 16: "goal_pwm", 0: "goal_current"}   # mode -> goal zeroed on expiry

# Goal registers limited by another register (e-manual: "Goal X ... can not exceed X Limit").
_GOAL_LIMITS = {"goal_pwm": "pwm_limit", "goal_current": "current_limit", "goal_velocity": "velocity_limit"}

# Factory Reset parameter (Protocol 2.0 instruction 0x06).
RESET_ALL = 0xFF
RESET_ALL_BUT_ID = 0x01
RESET_ALL_BUT_ID_AND_BAUD = 0x02


class ProtocolError(Exception):
    """An instruction the servo refuses; ``code`` is the Protocol 2.0 error number (1..7)."""

    def __init__(self, code: int, detail: str = "") -> None:
        self.code = int(code)
        name = xm430.STATUS_ERRORS.get(self.code, "unknown error")
        super().__init__(f"{name} ({self.code})" + (f": {detail}" if detail else ""))


def _owner_table() -> list[Register | None]:
    """Address -> the register holding that byte (None for reserved bytes)."""
    owners: list[Register | None] = [None] * xm430.CONTROL_TABLE_SIZE
    for register in xm430.CONTROL_TABLE:
        for address in range(register.address, register.end):
            owners[address] = register
    return owners


_OWNER = _owner_table()


class ServoRegisters:
    """Control-table memory of one emulated XM430-W350 (addresses 0..255), thread-safe.

    ``lock`` is public: the physics loop and the bus thread both hold it while they touch the
    table, so a physics step never lands in the middle of a Sync Read reply.
    """

    def __init__(self, servo_id: int, model_number: int = xm430.MODEL_NUMBER,
                 firmware_version: int = xm430.REGISTERS["firmware_version"].default) -> None:
        if not 0 <= servo_id <= 252:
            raise ValueError(f"servo id must be 0..252, got {servo_id}")
        if not 0 <= firmware_version <= 255:
            raise ValueError(f"firmware version must be 0..255, got {firmware_version}")
        self.lock = threading.RLock()
        self._model_number = int(model_number)
        self._firmware_version = int(firmware_version)
        self._memory = bytearray(xm430.CONTROL_TABLE_SIZE)
        self._last_instruction: float | None = None     # time.monotonic() of the last instruction for this servo
        self._load_defaults(keep=())
        self.set("id", servo_id)

    # ---- typed access for the servo itself (physics) ----------------------------------------
    def get(self, name: str) -> int:
        """Value of a register by name (signed where the register is signed)."""
        register = _register(name)
        with self.lock:
            return xm430.decode_value(register, self._memory[register.address: register.end])

    def set(self, name: str, value: int) -> None:
        """Internal write by the servo itself: no access or range checks, only the register's width."""
        register = _register(name)
        raw = _encode(register, value)
        with self.lock:
            self._memory[register.address: register.end] = raw

    @property
    def servo_id(self) -> int:
        # One unsigned byte, read on every packet for every servo on the bus: straight from the table.
        return self._memory[_ID_ADDRESS]

    @property
    def alert(self) -> bool:
        """True while a Hardware Error is latched: status packets carry the Alert bit (0x80)."""
        return self.get("hardware_error_status") != 0

    @property
    def torque_enabled(self) -> bool:
        return self.get("torque_enable") != 0

    @property
    def firmware_version(self) -> int:
        return self._firmware_version

    @property
    def has_bus_watchdog(self) -> bool:
        return self._firmware_version >= xm430.FIRMWARE_BUS_WATCHDOG

    @property
    def answers_fast_sync_read(self) -> bool:
        return self._firmware_version >= xm430.FIRMWARE_FAST_SYNC_READ

    @property
    def watchdog_expired(self) -> bool:
        return self.get("bus_watchdog") == xm430.BUS_WATCHDOG_EXPIRED

    # ---- Bus Watchdog -----------------------------------------------------------------------
    def instruction_received(self, now: float) -> None:
        """An instruction packet for this servo arrived at ``now`` (time.monotonic()): the watchdog restarts."""
        with self.lock:
            self._last_instruction = now

    def watchdog_deadline(self) -> float | None:
        """When the Bus Watchdog expires if no instruction arrives (time.monotonic()), None while it is not running."""
        with self.lock:
            units = self.get("bus_watchdog")
            if units <= 0 or not self.torque_enabled or self._last_instruction is None:
                return None
            return self._last_instruction + units * xm430.BUS_WATCHDOG_UNIT_S

    def check_watchdog(self, now: float) -> bool:
        """Expire the Bus Watchdog if its time has passed at ``now``: stop, hold, read -1. True when it expired now."""
        with self.lock:
            deadline = self.watchdog_deadline()
            if deadline is None or now <= deadline:
                return False
            self.set("bus_watchdog", xm430.BUS_WATCHDOG_EXPIRED)
            mode = self.get("operating_mode")
            if mode in _POSITION_MODES:
                self.set("goal_position", self.get("present_position"))
            elif mode in _HOLD_ON_WATCHDOG:
                self.set(_HOLD_ON_WATCHDOG[mode], 0)
            self.set("profile_velocity", 0)
            self.set("profile_acceleration", 0)
            return True

    # ---- protocol access (Read / Write instructions) ----------------------------------------
    def read(self, address: int, length: int) -> bytes:
        """Bytes ``address .. address+length-1`` as a Read instruction returns them."""
        if length < 0 or address < 0 or address + length > xm430.CONTROL_TABLE_SIZE:
            raise ProtocolError(ACCESS_ERROR, f"read {address}+{length} is outside the control table")
        with self.lock:
            out = bytearray(self._memory[address: address + length])
            if address < _INDIRECT_DATA_1 + _INDIRECT_COUNT and address + length > _INDIRECT_DATA_1:
                targets = self._indirect_targets()
                first = max(address, _INDIRECT_DATA_1)
                for at in range(first, min(address + length, _INDIRECT_DATA_1 + _INDIRECT_COUNT)):
                    target = targets[at - _INDIRECT_DATA_1]
                    # Indirect Address may point past this emulated table (allowed up to 661): reads 0.
                    out[at - address] = self._memory[target] if target < xm430.CONTROL_TABLE_SIZE else 0
            return bytes(out)

    def write(self, address: int, data: bytes) -> None:
        """Apply a Write instruction; all-or-none. Raises ProtocolError with the servo's error code."""
        with self.lock:
            self._memory[:] = self._stage(address, bytes(data))

    def check_write(self, address: int, data: bytes) -> None:
        """Raise the ProtocolError that ``write`` would raise, changing nothing (Reg Write checks)."""
        with self.lock:
            self._stage(address, bytes(data))

    # ---- whole-table operations ----------------------------------------------------------------
    def reboot(self) -> None:
        """Reboot: EEPROM kept, RAM (Torque Enable, Hardware Error Status, goals, gains ...) back to defaults."""
        with self.lock:
            for register in xm430.CONTROL_TABLE:
                if register.address >= EEPROM_END:
                    self._memory[register.address: register.end] = _encode(register, register.default)

    def factory_reset(self, mode: int) -> None:
        """Factory Reset: 0xFF resets everything, 0x01 keeps the ID, 0x02 keeps the ID and the baud rate."""
        keep = {RESET_ALL: (), RESET_ALL_BUT_ID: ("id",), RESET_ALL_BUT_ID_AND_BAUD: ("id", "baud_rate")}
        if mode not in keep:
            raise ProtocolError(DATA_RANGE_ERROR, f"factory reset mode 0x{mode:02X} is not 0xFF, 0x01 or 0x02")
        with self.lock:
            self._load_defaults(keep=keep[mode])

    def snapshot(self) -> bytes:
        """The raw 256-byte table (for logging and tests)."""
        with self.lock:
            return bytes(self._memory)

    # ---- internals ---------------------------------------------------------------------------
    def _stage(self, address: int, data: bytes) -> bytearray:
        """The table as it would be after the write; raises ProtocolError if the servo refuses it."""
        if not data:
            raise ProtocolError(DATA_LENGTH_ERROR, "write without data")
        if address < 0 or address + len(data) > xm430.CONTROL_TABLE_SIZE:
            raise ProtocolError(ACCESS_ERROR, f"write {address}+{len(data)} is outside the control table")
        staged = bytearray(self._memory)
        direct: list[tuple[Register, int]] = []
        for register, value in self._split_write(address, data):
            if register.name.startswith("indirect_data_"):
                self._stage_indirect(staged, register, value)
            else:
                staged[register.address: register.end] = data[register.address - address: register.end - address]
                direct.append((register, value))
        self._check_values(direct, staged)
        self._check_goal_limits(staged, {r.name for r, _ in direct})
        self._check_watchdog_write(staged, {r.name for r, _ in direct})
        if self.alert:
            # Shutdown latched: Torque Enable stays 0 until a Reboot (e-manual, Shutdown).
            staged[_TORQUE_ENABLE.address] = 0
        return staged

    def _load_defaults(self, keep: tuple[str, ...]) -> None:
        kept = {name: self.get(name) for name in keep}
        self._memory[:] = bytes(xm430.CONTROL_TABLE_SIZE)
        for register in xm430.CONTROL_TABLE:
            default = {"model_number": self._model_number,
                       "firmware_version": self._firmware_version}.get(register.name, register.default)
            self._memory[register.address: register.end] = _encode(register, default)
        for name, value in kept.items():
            self.set(name, value)

    def _indirect_target(self, address: int) -> int | None:
        """For an Indirect Data byte: the address its Indirect Address points at (else None)."""
        index = address - _INDIRECT_DATA_1
        return self._indirect_targets()[index] if 0 <= index < _INDIRECT_COUNT else None

    def _indirect_targets(self) -> tuple[int, ...]:
        """Where Indirect Data 1..28 point (their Indirect Addresses), in one unpack."""
        return _INDIRECT_ADDRESSES.unpack_from(self._memory, _INDIRECT_ADDRESS_1)

    def _split_write(self, address: int, data: bytes) -> list[tuple[Register, int]]:
        """Registers covered by a write with their new values; rejects partial, reserved and read-only bytes."""
        covered: list[tuple[Register, int]] = []
        cursor, end = address, address + len(data)
        while cursor < end:
            register = _OWNER[cursor]
            if register is None:
                raise ProtocolError(ACCESS_ERROR, f"address {cursor} is reserved")
            if register.address != cursor or register.end > end:
                raise ProtocolError(DATA_LENGTH_ERROR, f"write covers only part of {register.name}")
            if not register.writable:
                raise ProtocolError(ACCESS_ERROR, f"{register.name} is read-only")
            if register is _BUS_WATCHDOG and not self.has_bus_watchdog:
                raise ProtocolError(ACCESS_ERROR, f"firmware {self._firmware_version} has no Bus Watchdog")
            if register.eeprom and self.torque_enabled:
                raise ProtocolError(ACCESS_ERROR, f"{register.name} is EEPROM and Torque Enable is on")
            covered.append((register, xm430.decode_value(register, data[cursor - address: register.end - address])))
            cursor = register.end
        return covered

    def _stage_indirect(self, staged: bytearray, register: Register, value: int) -> None:
        """Write through Indirect Data N to the byte it points at (that byte must be writable RAM/EEPROM)."""
        target = self._indirect_target(register.address)
        owner = _OWNER[target] if target is not None and 0 <= target < xm430.CONTROL_TABLE_SIZE else None
        if owner is None or not owner.writable or owner.name.startswith("indirect_"):
            raise ProtocolError(ACCESS_ERROR, f"{register.name} points at a byte that cannot be written")
        if owner.eeprom and self.torque_enabled:
            raise ProtocolError(ACCESS_ERROR, f"{register.name} points into EEPROM and Torque Enable is on")
        staged[target] = value

    def _check_values(self, covered: list[tuple[Register, int]], staged: bytearray) -> None:
        for register, value in covered:
            if register.minimum is not None and value < register.minimum:
                raise ProtocolError(DATA_RANGE_ERROR, f"{register.name}={value} below {register.minimum}")
            if register.maximum is not None and value > register.maximum:
                raise ProtocolError(DATA_RANGE_ERROR, f"{register.name}={value} above {register.maximum}")
            if register.name == "operating_mode" and value not in xm430.OPERATING_MODES:
                raise ProtocolError(DATA_RANGE_ERROR, f"operating mode {value} does not exist on the XM430")
        # Registers reached through Indirect Data are range-checked on their assembled value.
        for register in {_OWNER[a] for a in range(xm430.CONTROL_TABLE_SIZE) if staged[a] != self._memory[a]}:
            if register is None or register.name.startswith("indirect_"):
                continue
            value = xm430.decode_value(register, staged[register.address: register.end])
            lo, hi = register.minimum, register.maximum
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                raise ProtocolError(DATA_RANGE_ERROR, f"{register.name}={value} outside {lo}..{hi}")

    def _check_watchdog_write(self, staged: bytearray, written: set[str]) -> None:
        """While the Bus Watchdog reads -1 the goals are read-only and only 0 (clear) may be written to it."""
        if not self.watchdog_expired:
            return
        if "bus_watchdog" in written:
            if xm430.decode_value(_BUS_WATCHDOG, staged[_BUS_WATCHDOG.address: _BUS_WATCHDOG.end]) != 0:
                raise ProtocolError(DATA_RANGE_ERROR, "Bus Watchdog expired: write 0 to clear it first")
            return
        changed = {_OWNER[a].name for a in range(xm430.CONTROL_TABLE_SIZE)
                   if staged[a] != self._memory[a] and _OWNER[a] is not None}
        touched = {name for name in _GOAL_REGISTERS if name in written or name in changed}
        if touched:
            raise ProtocolError(DATA_RANGE_ERROR, f"Bus Watchdog expired: {', '.join(sorted(touched))} read-only")

    def _check_goal_limits(self, staged: bytearray, written: set[str]) -> None:
        def value(name: str) -> int:
            register = xm430.REGISTERS[name]
            return xm430.decode_value(register, staged[register.address: register.end])

        for goal, limit in _GOAL_LIMITS.items():
            if goal in written and abs(value(goal)) > value(limit):
                raise ProtocolError(DATA_LIMIT_ERROR, f"|{goal}|={abs(value(goal))} above {limit}={value(limit)}")
        if "goal_position" in written and value("operating_mode") == 3:
            lo, hi = value("min_position_limit"), value("max_position_limit")
            if not lo <= value("goal_position") <= hi:
                raise ProtocolError(DATA_LIMIT_ERROR, f"goal_position={value('goal_position')} outside {lo}..{hi}")


def _register(name: str) -> Register:
    try:
        return xm430.REGISTERS[name]
    except KeyError:
        raise KeyError(f"no XM430 register named {name!r}") from None


def _encode(register: Register, value: int) -> bytes:
    try:
        return xm430.encode_value(register, int(value))
    except OverflowError:
        raise ValueError(f"{register.name}={value} does not fit {register.size} byte(s)") from None
