"""What answers at a `--storage grpc://HOST:PORT`, found before gRPC's client is asked (it would retry
quietly until its timeout): one connection opened as an HTTP/2 client (the preface and an empty SETTINGS
frame, RFC 9113 section 3.4), which a gRPC server answers with its own SETTINGS frame and then the ack of
ours. A server that turns the connection away there (a GOAWAY frame) is named with its reason; whether
it answers a call, the storage's first call tells (`storage._grpc_storage`).
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
_SETTINGS = 4  # frame types
_GOAWAY = 7
_ACK = 1  # the flag of a SETTINGS frame that acknowledges the peer's
_SETTING_SIZE = 6  # bytes per setting in a SETTINGS frame
_MOST_READ = 65536  # bytes read before the handshake is judged: a server's first frames are a few dozen
SHOWN_BYTES = 16  # of an unknown answer, quoted in the message
# RFC 9113 section 7: the error codes a GOAWAY frame gives.
ERROR_CODES = (
    "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT", "STREAM_CLOSED",
    "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM",
    "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
)  # fmt: skip


class Answer(enum.Enum):
    """What kind of server a first answer shows."""

    HTTP2 = "http2"  # a SETTINGS frame: a gRPC server (or another HTTP/2 one, which the first call tells)
    GOAWAY = "goaway"  # an HTTP/2 server that sent its SETTINGS, then turned the connection away
    HTTP = "http"  # an HTTP/1 status line or an HTML page
    OTHER = "other"  # bytes that are neither
    CLOSED = "closed"  # the connection closed (or reset) before any byte, or right after the server's SETTINGS
    SILENT = "silent"  # no byte within the time given


@dataclass(frozen=True)
class Probe:
    """What answered a connection (`probe`), and its first bytes."""

    answer: Answer
    first_bytes: bytes = b""  # what came back, up to SHOWN_BYTES
    goaway: tuple[int, bytes] | None = None  # a GOAWAY's error code and debug data

    def describe(self, address: str) -> str:
        """What answered at `address`, for a message."""
        if self.answer is Answer.GOAWAY and self.goaway is not None:
            code, debug = self.goaway
            name = ERROR_CODES[code] if code < len(ERROR_CODES) else f"error code {code}"
            # repr: bytes from the network reach the terminal escaped
            reason = f"{name}: {debug!r}" if debug else name
            return f"an HTTP/2 server at {address} closed the connection (GOAWAY, {reason}): not a gRPC proxy"
        return {
            Answer.HTTP2: f"an HTTP/2 server answers at {address}",
            Answer.HTTP: f"an HTTP server answers at {address}, not a gRPC proxy",
            Answer.OTHER: f"something that is not a gRPC proxy answers at {address} (its first bytes: "
            f"{self.first_bytes!r})",
            Answer.CLOSED: f"{address} closed the connection at once (what listens there is not a gRPC proxy)",
            Answer.SILENT: f"no answer from {address}",
        }[self.answer]


def probe(host: str, port: int, timeout: float) -> Probe:
    """Connect to HOST:PORT as an HTTP/2 client and classify its answer to the handshake, within `timeout`
    seconds in all: read until the server has acknowledged our SETTINGS, turned the connection away, sent
    something that is no HTTP/2, closed the connection, or let the time pass.

    The connection's own failures (ConnectionRefusedError, an unreachable host, a name that does not
    resolve, no connection in time) are raised as `socket.create_connection` raises them.
    """
    deadline = time.monotonic() + timeout
    received = b""
    ended = False  # the server closed the connection (or reset it: closed with our bytes unread)
    with socket.create_connection((host, port), timeout=timeout) as connection:
        try:
            connection.sendall(_PREFACE + _EMPTY_SETTINGS)
            while not _handshake_told(received):
                connection.settimeout(max(deadline - time.monotonic(), 0.001))
                chunk = connection.recv(4096)
                if not chunk:
                    ended = True
                    break
                received += chunk
        except TimeoutError:
            pass
        except (ConnectionResetError, BrokenPipeError):
            ended = True
    answer = classify(received, ended=ended)
    return Probe(answer, received[:SHOWN_BYTES], _goaway(received) if answer is Answer.GOAWAY else None)


def classify(received: bytes, *, ended: bool) -> Answer:
    """What a server's first bytes say it is (`ended`: the connection closed after them)."""
    if not received:
        return Answer.CLOSED if ended else Answer.SILENT
    if _is_settings_frame(received):
        if _goaway(received) is not None:
            return Answer.GOAWAY
        return Answer.CLOSED if ended else Answer.HTTP2
    start = received.lstrip().lower()
    if start.startswith((b"http/", b"<!doctype html", b"<html")):  # Python's http.server sends no status line
        return Answer.HTTP
    return Answer.OTHER


def _handshake_told(received: bytes) -> bool:
    """Whether `received` tells what the server is: not an HTTP/2 server's SETTINGS, or one followed by the ack
    of ours or by a GOAWAY (or more bytes than a handshake takes)."""
    if len(received) < _FRAME_HEADER:
        return False
    if not _is_settings_frame(received) or len(received) >= _MOST_READ:
        return True
    return any(kind == _GOAWAY or (kind == _SETTINGS and flags & _ACK) for kind, flags, _ in _frames(received))


def _frames(received: bytes) -> list[tuple[int, int, bytes]]:
    """The complete frames at the start of `received`: (type, flags, payload) of each."""
    frames, at = [], 0
    while at + _FRAME_HEADER <= len(received):
        length = int.from_bytes(received[at : at + 3], "big")
        end = at + _FRAME_HEADER + length
        if end > len(received):
            break
        frames.append((received[at + 3], received[at + 4], received[at + _FRAME_HEADER : end]))
        at = end
    return frames


def _goaway(received: bytes) -> tuple[int, bytes] | None:
    """The error code and debug data of the first complete GOAWAY frame in `received`, if any."""
    for kind, _, payload in _frames(received):
        if kind == _GOAWAY and len(payload) >= 8:
            return int.from_bytes(payload[4:8], "big"), payload[8 : 8 + SHOWN_BYTES * 4]
    return None


def _is_settings_frame(received: bytes) -> bool:
    if len(received) < _FRAME_HEADER:
        return False
    length = int.from_bytes(received[0:3], "big")
    stream = int.from_bytes(received[5:9], "big") & 0x7FFFFFFF  # the top bit is reserved
    return received[3] == _SETTINGS and stream == 0 and length % _SETTING_SIZE == 0
