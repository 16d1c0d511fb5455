"""Pure parts of the Docker sandbox's long-lived shell: stream demultiplexing and the call markers."""

from __future__ import annotations

import struct

import pytest

from hermes_runner.sandbox.docker.shell import (
    MAX_LINE_COMMAND,
    MAX_LINES,
    STDERR,
    STDOUT,
    Call,
    Demux,
    Until,
    framed,
    partial,
    usable_path,
)

NONCE = "0123456789abcdef0123456789abcdef"


def frame(stream: int, data: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(data)) + data


def test_demux_reassembles_frames_split_anywhere():
    wire = frame(STDOUT, b"hello ") + frame(STDERR, b"oops") + frame(STDOUT, b"world") + frame(STDOUT, b"")
    for cut in range(len(wire) + 1):
        d = Demux()
        got = d.feed(wire[:cut]) + d.feed(wire[cut:])
        assert got == [(STDOUT, b"hello "), (STDERR, b"oops"), (STDOUT, b"world"), (STDOUT, b"")]
        assert not d.buf


@pytest.mark.parametrize(
    ("data", "expected"), [(b"abcE01", 3), (b"E", 1), (b"xyz", 0), (b"E0123x", 0), (b"", 0), (b"EE0", 2)]
)
def test_partial_marker_at_the_end(data, expected):
    assert partial(bytearray(data), b"E0123 ") == expected


def run_call(chunks: list[tuple[int, bytes]]) -> tuple[Call, bytes, bytes]:
    call = Call(NONCE)
    out, err = bytearray(), bytearray()
    for stream, chunk in chunks:
        o, e = call.feed(stream, chunk)
        out += o
        err += e
    return call, bytes(out), bytes(err)


def bytewise(stream: int, data: bytes) -> list[tuple[int, bytes]]:
    return [(stream, data[i : i + 1]) for i in range(len(data))]


def test_call_passes_output_and_reads_the_exit_code_byte_by_byte():
    wire = f"stray\nS{NONCE}\n123\nhi E0 not-a-marker\n".encode() + f"E{NONCE} 7\n".encode()
    call, out, err = run_call(bytewise(STDOUT, wire) + bytewise(STDERR, f"warn\nE{NONCE} 7\n".encode()))
    assert call.done and call.out.code == 7 and call.started
    assert out == b"123\nhi E0 not-a-marker\n" and err == b"warn\n"
    assert call.stray == len(b"stray\n")


def test_call_output_without_newline_and_bytes_after_the_end():
    call, out, _ = run_call([(STDOUT, f"S{NONCE}\nno newline".encode() + f"E{NONCE} 0\nlate".encode())])
    assert out == b"no newline" and call.out.code == 0 and not call.done  # stderr's marker is still due
    call.feed(STDERR, f"E{NONCE} 0\n".encode())
    assert call.done and call.stray == 0


def test_output_flows_before_the_end_marker_arrives():
    """A long command's first lines (its pid) must not wait for the end: a timeout needs them."""
    call = Call(NONCE)
    out, _ = call.feed(STDOUT, f"S{NONCE}\n4242\nbegin\n".encode())
    assert out == b"4242\nbegin\n" and not call.done


def test_a_marker_with_another_nonce_is_output():
    other = "f" * 32
    text = f"S{other}\nE{other} 0\n".encode()
    call, out, _ = run_call([(STDOUT, f"S{NONCE}\n".encode() + text + f"E{NONCE} 1\n".encode())])
    assert out == text and call.out.code == 1


def test_until_holds_a_split_exit_code():
    u = Until(b"E9 ")
    assert u.feed(b"abcE9 1") == b"abc" and not u.done
    assert u.feed(b"27\nrest") == b"" and u.code == 127


@pytest.mark.parametrize(
    ("path", "ok"),
    [("/workspace", True), ("/a b/c", True), ("/a\nb", False), ("/trailing ", False), (" /lead", False), ("", False)],
)
def test_usable_path(path, ok):
    assert usable_path(path) is ok


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo hi", ("line", 1, b"echo hi\n")),
        ("a\nb\n", ("line", 2, b"a\nb\n")),
        ("", ("line", 1, b"\n")),
        ("x\0y", ("run", 3, b"x\0y")),  # NUL bytes: by bytes, as a per-call exec gets them
        ("e" * (MAX_LINE_COMMAND + 1), ("run", MAX_LINE_COMMAND + 1, b"e" * (MAX_LINE_COMMAND + 1))),
        ("\n" * (MAX_LINES + 1), ("run", MAX_LINES + 1, b"\n" * (MAX_LINES + 1))),
    ],
)
def test_framed_short_commands_go_by_lines(command, expected):
    assert framed(command) == expected
