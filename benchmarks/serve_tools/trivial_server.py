"""A trivial streaming LLM server for measuring load generators: loopback only, no model, raw asyncio HTTP/1.1.

Why hand-written and raw: the measurement is of the CLIENT (how many requests/s a load generator can drive,
how exactly it times tokens), so the server must cost as little as possible and know exactly when it sent
each byte. It speaks the same streaming shapes as SGLang and pdctl's reference engine: POST /generate (SGLang's
cumulative events with meta_info), POST /v1/completions and /v1/chat/completions (OpenAI chunks and a usage
chunk), GET /v1/models, /health, /model_info. Tokens are bytes (pdctl's reference byte tokenizer: a text
prompt costs 1 + its UTF-8 bytes, BOS included); each output token is the byte "a".

Delays make it a timing oracle: `--ttft-ms` before the first token, `--itl-ms` between tokens; every request's
server-side times (received, first token written, last token written) are appended to `--log` as JSONL.

    python -m benchmarks.serve_tools.trivial_server --port-file P [--ttft-ms 0] [--itl-ms 0] [--log L]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import uuid
from pathlib import Path

MODEL = "trivial"


def _prompt_tokens(body: dict) -> int:
    if isinstance(body.get("input_ids"), list):
        return len(body["input_ids"])
    if isinstance(body.get("messages"), list):
        text = "".join(str(m.get("content", "")) for m in body["messages"] if isinstance(m, dict))
    else:
        text = body.get("text") if "text" in body else body.get("prompt", "")
        if isinstance(text, list):
            if text and all(isinstance(t, int) for t in text):
                return len(text)
            text = "".join(map(str, text))
    return 1 + len(str(text).encode("utf-8"))


def _max_tokens(body: dict) -> int:
    sp = body.get("sampling_params") if isinstance(body.get("sampling_params"), dict) else {}
    for value in (sp.get("max_new_tokens"), body.get("max_completion_tokens"), body.get("max_tokens")):
        if isinstance(value, int) and value > 0:
            return value
    return 16


def _usage(prompt: int, done: int) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}


def _event(path: str, rid: str, prompt: int, done: int, total: int, chat: bool, usage: bool) -> list[dict]:
    """The SSE documents to send after token number DONE (1-based) of TOTAL (USAGE: the final usage chunk,
    which OpenAI and SGLang send only for `stream_options.include_usage`)."""
    last = done == total
    if path == "/generate":
        return [{"text": "a" * done, "output_ids": [97] * done, "meta_info": {
            "id": rid, "prompt_tokens": prompt, "completion_tokens": done, "cached_tokens": 0,
            "finish_reason": {"type": "length", "length": total} if last else None}}]
    kind = "chat.completion.chunk" if chat else "text_completion"
    base = {"id": rid, "object": kind, "created": int(time.time()), "model": MODEL}
    delta = {"role": "assistant", "content": "a"} if chat else None
    choice = {"index": 0, "finish_reason": "length" if last else None}
    choice.update({"delta": delta} if chat else {"text": "a"})
    docs = [{**base, "choices": [choice], "usage": None}]
    if last and usage:
        docs.append({**base, "choices": [], "usage": _usage(prompt, total)})
    return docs


class Server:
    def __init__(self, ttft_s: float, itl_s: float, log: str | None) -> None:
        self.ttft_s, self.itl_s = ttft_s, itl_s
        self.log = open(log, "a", buffering=1) if log else None  # noqa: SIM115 - open for the server's life

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                received = time.time()
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in lines[1:] if ":" in h)}
                body = await reader.readexactly(int(headers.get("content-length", 0) or 0))
                path = path.split("?", 1)[0]
                if method == "GET":
                    await self._json(writer, self._get(path))
                elif path in ("/generate", "/v1/completions", "/v1/chat/completions"):
                    await self._generate(writer, path, json.loads(body or b"{}"), received)
                else:
                    await self._json(writer, {"error": "not found"}, status="404 Not Found")
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    def _get(self, path: str) -> dict:
        if path == "/v1/models":
            return {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "bench"}]}
        return {"model_path": MODEL, "is_generation": True, "status": "ok"}

    async def _json(self, writer: asyncio.StreamWriter, doc: dict, status: str = "200 OK") -> None:
        data = json.dumps(doc).encode()
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
                     .encode() + data)
        await writer.drain()

    async def _generate(self, writer: asyncio.StreamWriter, path: str, body: dict, received: float) -> None:
        prompt, total = _prompt_tokens(body), _max_tokens(body)
        rid, chat = uuid.uuid4().hex, path.endswith("chat/completions")
        if not body.get("stream"):
            docs = _event(path, rid, prompt, total, total, chat, False)
            if path != "/generate":
                docs[0]["choices"][0]["text"] = "a" * total
                docs[0]["usage"] = _usage(prompt, total)
            await self._json(writer, docs[0])
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        options = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
        usage = bool(options.get("include_usage"))
        times = []
        if self.ttft_s:
            await asyncio.sleep(self.ttft_s)
        for done in range(1, total + 1):
            if done > 1 and self.itl_s:
                await asyncio.sleep(self.itl_s)
            payload = "".join(f"data: {json.dumps(d)}\n\n" for d in _event(path, rid, prompt, done, total, chat,
                                                                            usage))
            if done == total:
                payload += "data: [DONE]\n\n"
            data = payload.encode()
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()
            times.append(time.time())
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        if self.log:
            self.log.write(json.dumps({"received": received, "prompt_tokens": prompt, "output_tokens": total,
                                       "token_times": times}) + "\n")


async def _main(args: argparse.Namespace) -> None:
    server = Server(args.ttft_ms / 1000, args.itl_ms / 1000, args.log)
    srv = await asyncio.start_server(server.handle, "127.0.0.1", args.port, limit=1 << 22, backlog=4096)
    port = srv.sockets[0].getsockname()[1]
    if args.port_file:
        tmp = Path(f"{args.port_file}.tmp")
        tmp.write_text(str(port))
        os.replace(tmp, args.port_file)
    async with srv:
        await srv.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file")
    parser.add_argument("--ttft-ms", type=float, default=0.0)
    parser.add_argument("--itl-ms", type=float, default=0.0)
    parser.add_argument("--log")
    try:
        asyncio.run(_main(parser.parse_args()))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
