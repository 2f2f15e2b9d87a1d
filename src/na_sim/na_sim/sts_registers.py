"""Control-table memory of one emulated Feetech STS3215 (ROS-free).

Layout, defaults, ranges and encodings come from :mod:`na_description.sts3215`; this module adds
what the servo does with protocol access. STS firmware has no error codes for a refused access
(the status ERR byte only carries the Status bits), so the rules are lenient, and where the
public sources are silent the choices are ours (docs/REFERENCES.md, STS3215):

* reads may cover any address 0..255; bytes no register owns read 0, bytes past 255 are not sent;
* a write changes only writable bytes (read-only and unowned bytes keep their value, without an
  error); a register whose new value is outside its range keeps its old value, the other
  registers of the same write still change;
* the EEPROM area (addresses 0-39 and the factory bytes 80-86) is always writable, torque on or
  off, and takes effect at once; it is also saved (survives :meth:`StsServoRegisters.power_cycle`)
  only when Lock (55) was 0 when the write arrived. Lock powers up as 1, so a client that does
  not unlock loses its EEPROM changes at the next power cycle (vendor SDK "unLockEprom/LockEprom");
* Torque Enable accepts 0, 1 and 128. 128 is the "middle calibration" command: Homing Offset is
  set so that the present position reads 2048 (saved like any EEPROM write); Torque Enable keeps
  its previous value;
* at power-on Torque Limit (48) is loaded from Max Torque Limit (16), RAM registers return to
  their defaults and the Status bits clear.
"""

from __future__ import annotations

import threading

from na_description import sts3215

Register = sts3215.Register

_POSITION_REV = sts3215.STEPS_PER_REV
_TORQUE_ENABLE = sts3215.REGISTERS["torque_enable"].address
_TORQUE_ENABLE_VALUES = (sts3215.TORQUE_OFF, sts3215.TORQUE_ON, sts3215.TORQUE_CALIBRATE_MIDDLE)
_HOMING_LIMIT = (1 << sts3215.REGISTERS["homing_offset"].sign_bit) - 1       # 2047


def _owner_table() -> list[Register | None]:
    """Address -> the register holding that byte (None for bytes no register owns)."""
    owners: list[Register | None] = [None] * sts3215.CONTROL_TABLE_SIZE
    for register in sts3215.CONTROL_TABLE:
        for address in range(register.address, register.end):
            owners[address] = register
    return owners


_OWNER = _owner_table()


class StsServoRegisters:
    """Control table (addresses 0..255) of one emulated STS3215 plus its saved EEPROM image; thread-safe.

    ``lock`` is public: the physics loop and the bus thread both hold it while they touch the table.
    """

    def __init__(self, servo_id: int, model_number: int = sts3215.MODEL_NUMBER) -> None:
        if not 0 <= servo_id <= sts3215.REGISTERS["id"].maximum:
            raise ValueError(f"servo id must be 0..253, got {servo_id}")
        self.lock = threading.RLock()
        self._memory = bytearray(sts3215.CONTROL_TABLE_SIZE)
        for register in sts3215.CONTROL_TABLE:
            default = model_number if register.name == "model_number" else register.default
            self._memory[register.address: register.end] = _encode(register, default)
        self._defaults = bytes(self._memory)
        self.set("id", servo_id)
        self._saved = bytearray(self._memory)          # what the EEPROM keeps across a power cycle
        self._power_on()

    # ---- typed access for the servo itself (physics, tests) ----------------------------------
    def get(self, name: str) -> int:
        """Value of a register by name (sign-magnitude registers decoded to signed integers)."""
        register = _register(name)
        with self.lock:
            return sts3215.decode_value(register, self._memory[register.address: register.end])

    def set(self, name: str, value: int) -> None:
        """Internal write by the servo itself: no access or range checks, only the register's width."""
        register = _register(name)
        raw = _encode(register, value)
        with self.lock:
            self._memory[register.address: register.end] = raw

    def store_block(self, address: int, data: bytes) -> None:
        """Internal write of raw bytes (no checks), e.g. the physics' present-value block in one go."""
        if address < 0 or address + len(data) > sts3215.CONTROL_TABLE_SIZE:
            raise ValueError(f"block {address}+{len(data)} is outside the control table")
        with self.lock:
            self._memory[address: address + len(data)] = data

    @property
    def servo_id(self) -> int:
        return self.get("id")

    @property
    def torque_enabled(self) -> bool:
        return self.get("torque_enable") == sts3215.TORQUE_ON

    @property
    def error_bits(self) -> int:
        """The Status bits every status packet carries in its ERR byte."""
        return self.get("status") & 0x7F

    # ---- protocol access (Read / Write instructions) ----------------------------------------
    def read(self, address: int, length: int) -> bytes:
        """Bytes ``address .. address+length-1`` as a Read instruction returns them (at most up to 255)."""
        if address < 0 or length < 0:
            raise ValueError(f"read {address}+{length}: address and length must be >= 0")
        with self.lock:
            return bytes(self._memory[address: address + length])

    def write(self, address: int, data: bytes) -> list[str]:
        """Apply a Write instruction the way the firmware does; returns the names of the registers it changed."""
        with self.lock:
            saving = self._memory[sts3215.REGISTERS["lock"].address] == 0
            staged = bytearray(self._memory)
            touched: dict[str, Register] = {}
            for offset, byte in enumerate(bytes(data)):
                target = address + offset
                owner = _OWNER[target] if 0 <= target < sts3215.CONTROL_TABLE_SIZE else None
                if owner is not None and owner.writable:
                    staged[target] = byte
                    touched[owner.name] = owner
            accepted = []
            for register in touched.values():
                value = sts3215.decode_value(register, staged[register.address: register.end])
                if _in_range(register, value):
                    accepted.append(register)
                else:           # out of range: this register keeps its old value
                    staged[register.address: register.end] = self._memory[register.address: register.end]
            if "torque_enable" in {r.name for r in accepted} and staged[_TORQUE_ENABLE] == 128:
                staged[_TORQUE_ENABLE] = self._memory[_TORQUE_ENABLE]
                accepted = [r for r in accepted if r.name != "torque_enable"]
                accepted.append(self._calibrate_middle(staged))
            self._memory[:] = staged
            if saving:
                for register in accepted:
                    if register.eeprom:
                        self._saved[register.address: register.end] = staged[register.address: register.end]
            return [r.name for r in accepted]

    # ---- whole-table operations ----------------------------------------------------------------
    def power_cycle(self) -> None:
        """Power off and on: RAM back to its defaults, the EEPROM area as last saved (see the module doc)."""
        with self.lock:
            self._memory[:] = self._defaults
            for register in sts3215.CONTROL_TABLE:
                if register.eeprom:
                    self._memory[register.address: register.end] = self._saved[register.address: register.end]
            self._power_on()

    def snapshot(self) -> bytes:
        """The raw 256-byte table (for the physics, logging and tests)."""
        with self.lock:
            return bytes(self._memory)

    def saved_eeprom(self) -> bytes:
        """The table as the next power cycle would load it (EEPROM bytes saved, RAM at defaults)."""
        with self.lock:
            image = bytearray(self._defaults)
            for register in sts3215.CONTROL_TABLE:
                if register.eeprom:
                    image[register.address: register.end] = self._saved[register.address: register.end]
            return bytes(image)

    # ---- internals -----------------------------------------------------------------------------
    def _power_on(self) -> None:
        self.set("torque_limit", self.get("max_torque_limit"))

    def _calibrate_middle(self, staged: bytearray) -> Register:
        """Torque Enable = 128: Homing Offset such that Present Position reads 2048 (Present = actual - offset)."""
        position_reg, homing_reg = sts3215.REGISTERS["present_position"], sts3215.REGISTERS["homing_offset"]
        present = sts3215.decode_value(position_reg, staged[position_reg.address: position_reg.end])
        offset = sts3215.decode_value(homing_reg, staged[homing_reg.address: homing_reg.end])
        actual = (present + offset) % _POSITION_REV
        new_offset = max(-_HOMING_LIMIT, min(_HOMING_LIMIT, actual - sts3215.POSITION_CENTER))
        staged[homing_reg.address: homing_reg.end] = _encode(homing_reg, new_offset)
        staged[position_reg.address: position_reg.end] = _encode(position_reg, (actual - new_offset) % _POSITION_REV)
        return homing_reg


def _in_range(register: Register, value: int) -> bool:
    if register.name == "torque_enable":
        return value in _TORQUE_ENABLE_VALUES
    return (register.minimum is None or value >= register.minimum) and \
        (register.maximum is None or value <= register.maximum)


def _register(name: str) -> Register:
    try:
        return sts3215.REGISTERS[name]
    except KeyError:
        raise KeyError(f"no STS3215 register named {name!r}") from None


def _encode(register: Register, value: int) -> bytes:
    try:
        return sts3215.encode_value(register, int(value))
    except ValueError:
        raise ValueError(f"{register.name}={value} does not fit {register.size} byte(s)") from None
