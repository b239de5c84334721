#!/usr/bin/env python3
# A TCP proxy to 127.0.0.1 that forwards what clients send at --rate bytes a
# second (answers go back at full speed), and keeps the count of bytes sent
# upstream in --progress: a push through it is slow enough for a test to stop
# it half-way (test_cluster_slurm.sh cancels a Slurm task in the middle of it).
import argparse
import asyncio
import os

p = argparse.ArgumentParser()
p.add_argument("--upstream", required=True)     # host:port
p.add_argument("--port-file", required=True)
p.add_argument("--rate", type=int, default=1 << 20)
p.add_argument("--progress", required=True)
a = p.parse_args()
host, port = a.upstream.rsplit(":", 1)
sent = 0


def note():
    tmp = a.progress + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(sent))
    os.replace(tmp, a.progress)


async def pipe(reader, writer, slow):
    global sent
    try:
        while True:
            chunk = await reader.read(16384 if slow else 65536)
            if not chunk:
                break
            writer.write(chunk)
            await writer.drain()
            if slow:
                sent += len(chunk)
                note()
                await asyncio.sleep(len(chunk) / a.rate)
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def handle(creader, cwriter):
    try:
        ureader, uwriter = await asyncio.open_connection(host, int(port))
    except OSError:
        cwriter.close()
        return
    await asyncio.gather(pipe(creader, uwriter, True), pipe(ureader, cwriter, False))


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    note()
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.sockets[0].getsockname()[1]))
    os.replace(tmp, a.port_file)
    async with server:
        await server.serve_forever()


asyncio.run(main())
