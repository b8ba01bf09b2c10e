"""What answers at a `--storage grpc://HOST:PORT`, found before gRPC's client is asked (it would retry
quietly until its timeout): one connection opened as an HTTP/2 client (the preface and an empty SETTINGS
frame, RFC 9113 section 3.4), which a gRPC server answers with its own SETTINGS frame.
"""

from __future__ import annotations

import enum
import socket
import time
from dataclasses import dataclass

# The client's connection preface: the fixed string, then its (empty) SETTINGS frame.
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_EMPTY_SETTINGS = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # length 0, type SETTINGS, no flags, stream 0
_FRAME_HEADER = 9  # bytes: length (3), type (1), flags (1), stream (4)
_SETTINGS = 4  # the frame type
_SETTING_SIZE = 6  # bytes per setting in a SETTINGS frame
SHOWN_BYTES = 16  # of an unknown answer, quoted in the message


class Answer(enum.Enum):
    """What kind of server a first answer shows."""

    HTTP2 = "http2"  # a SETTINGS frame: a gRPC server (or another HTTP/2 one, which the first call tells)
    HTTP = "http"  # an HTTP/1 status line or an HTML page
    OTHER = "other"  # bytes that are neither
    CLOSED = "closed"  # the connection closed (or reset) before any byte
    SILENT = "silent"  # no byte within the time given


@dataclass(frozen=True)
class Probe:
    """What answered a connection (`probe`), and its first bytes."""

    answer: Answer
    first_bytes: bytes = b""  # what came back, up to SHOWN_BYTES

    def describe(self, address: str) -> str:
        """What answered at `address`, for a message."""
        return {
            Answer.HTTP2: f"an HTTP/2 server answers at {address}",
            Answer.HTTP: f"an HTTP server answers at {address}, not a gRPC proxy",
            # repr: bytes from the network reach the terminal escaped
            Answer.OTHER: f"something that is not a gRPC proxy answers at {address} (its first bytes: "
            f"{self.first_bytes!r})",
            Answer.CLOSED: f"{address} closed the connection at once (what listens there is not a gRPC proxy)",
            Answer.SILENT: f"no answer from {address}",
        }[self.answer]


def probe(host: str, port: int, timeout: float) -> Probe:
    """Connect to HOST:PORT as an HTTP/2 client and classify its first answer, within `timeout` seconds in all.

    The connection's own failures (ConnectionRefusedError, an unreachable host, a name that does not
    resolve, no connection in time) are raised as `socket.create_connection` raises them.
    """
    deadline = time.monotonic() + timeout
    received = b""
    ended = False  # the server closed the connection (or reset it: closed with our bytes unread)
    with socket.create_connection((host, port), timeout=timeout) as connection:
        try:
            connection.sendall(_PREFACE + _EMPTY_SETTINGS)
            while len(received) < _FRAME_HEADER:
                connection.settimeout(max(deadline - time.monotonic(), 0.001))
                chunk = connection.recv(256)
                if not chunk:
                    ended = True
                    break
                received += chunk
        except TimeoutError:
            pass
        except (ConnectionResetError, BrokenPipeError):
            ended = True
    return Probe(classify(received, ended=ended), received[:SHOWN_BYTES])


def classify(received: bytes, *, ended: bool) -> Answer:
    """What a server's first bytes say it is (`ended`: the connection closed after them)."""
    if not received:
        return Answer.CLOSED if ended else Answer.SILENT
    if _is_settings_frame(received):
        return Answer.HTTP2
    start = received.lstrip().lower()
    if start.startswith((b"http/", b"<!doctype html", b"<html")):  # Python's http.server sends no status line
        return Answer.HTTP
    return Answer.OTHER


def _is_settings_frame(received: bytes) -> bool:
    if len(received) < _FRAME_HEADER:
        return False
    length = int.from_bytes(received[0:3], "big")
    stream = int.from_bytes(received[5:9], "big") & 0x7FFFFFFF  # the top bit is reserved
    return received[3] == _SETTINGS and stream == 0 and length % _SETTING_SIZE == 0
