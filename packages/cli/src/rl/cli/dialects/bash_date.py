"""`date [-u] [+FORMAT]` as GNU date prints it in the C locale, computed here (never run):
the common `%` codes, GNU's `-` `_` `0` `^` `#` flags, and `date` alone
(`Wed Nov 25 17:33:59 UTC 2026`)."""

from __future__ import annotations

from datetime import UTC, datetime

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
DEFAULT = "%a %b %e %H:%M:%S %Z %Y"
COMPOSED = {
    "c": "%a %b %e %H:%M:%S %Y",
    "D": "%m/%d/%y",
    "F": "%Y-%m-%d",
    "T": "%H:%M:%S",
    "R": "%H:%M",
    "r": "%I:%M:%S %p",
    "x": "%m/%d/%y",
    "X": "%H:%M:%S",
    "h": "%b",
}


class DateProblem(ValueError):
    """A `date` option or format code this reader does not compute."""


def _zone(moment: datetime, colon: bool) -> str:
    offset = moment.utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset else 0
    sign = "-" if minutes < 0 else "+"
    hours, minutes = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}{':' if colon else ''}{minutes:02d}"


def _field(code: str, moment: datetime) -> tuple[str, int, str]:
    """(value, padded width, pad character) of the `%code` of `moment`."""
    hour12 = moment.hour % 12 or 12
    iso = moment.isocalendar()
    numbers = {
        "Y": (moment.year, 4, "0"),
        "C": (moment.year // 100, 2, "0"),
        "y": (moment.year % 100, 2, "0"),
        "m": (moment.month, 2, "0"),
        "d": (moment.day, 2, "0"),
        "e": (moment.day, 2, " "),
        "H": (moment.hour, 2, "0"),
        "k": (moment.hour, 2, " "),
        "I": (hour12, 2, "0"),
        "l": (hour12, 2, " "),
        "M": (moment.minute, 2, "0"),
        "S": (moment.second, 2, "0"),
        "j": (moment.timetuple().tm_yday, 3, "0"),
        "u": (iso.weekday, 1, "0"),
        "w": (moment.isoweekday() % 7, 1, "0"),
        "G": (iso.year, 4, "0"),
        "g": (iso.year % 100, 2, "0"),
        "V": (iso.week, 2, "0"),
        "U": (int(moment.strftime("%U")), 2, "0"),
        "W": (int(moment.strftime("%W")), 2, "0"),
        "s": (int(moment.timestamp()), 1, "0"),
        "N": (moment.microsecond * 1000, 9, "0"),
    }
    if code in numbers:
        value, width, pad = numbers[code]
        return str(value), width, pad
    words = {
        "a": DAYS[moment.weekday()][:3],
        "A": DAYS[moment.weekday()],
        "b": MONTHS[moment.month - 1][:3],
        "B": MONTHS[moment.month - 1],
        "p": "AM" if moment.hour < 12 else "PM",
        "P": "am" if moment.hour < 12 else "pm",
        "Z": moment.tzname() or "UTC",
        "z": _zone(moment, colon=False),
        "n": "\n",
        "t": "\t",
        "%": "%",
    }
    if code in words:
        return words[code], 0, " "
    raise DateProblem(f"the format code %{code}")


def strftime(fmt: str, moment: datetime) -> str:
    """`moment` formatted as `date +fmt` prints it (C locale)."""
    out: list[str] = []
    at = 0
    while at < len(fmt):
        if fmt[at] != "%" or at + 1 >= len(fmt):
            out.append(fmt[at])
            at += 1
            continue
        at += 1
        flags = ""
        while fmt[at] in "-_0^#" and at + 1 < len(fmt):
            flags += fmt[at]
            at += 1
        code = fmt[at]
        at += 1
        if fmt.startswith(":z", at - 1):
            code, at = ":z", at + 1
        if code in COMPOSED:
            out.append(strftime(COMPOSED[code], moment))
            continue
        if code == ":z":
            out.append(_zone(moment, colon=True))
            continue
        value, width, pad = _field(code, moment)
        if "-" in flags:
            width = 0
        elif "_" in flags:
            pad = " "
        elif "0" in flags:
            pad = "0"
        if "^" in flags or ("#" in flags and code in "aAbBh"):
            value = value.upper()
        elif "#" in flags and code in "Zp":  # GNU's `#`: the other case
            value = value.lower()
        out.append(value.rjust(width, pad) if pad == " " else value.zfill(width))
    return "".join(out)


def date(arguments: list[str], now: datetime) -> str:
    """What `date ARGUMENTS` prints at `now` (local time with its zone; `-u` in UTC);
    DateProblem for an option such as `-d` that is not computed here."""
    moment, fmt = now.astimezone(), DEFAULT
    for word in arguments:
        if word in ("-u", "--utc", "--universal"):
            moment = now.astimezone(UTC)
        elif word in ("-I", "--iso-8601", "-Idate", "--iso-8601=date"):
            fmt = "%Y-%m-%d"
        elif word.startswith("+"):
            fmt = word[1:]
        else:
            raise DateProblem(f"the option {word}")
    return strftime(fmt, moment)
