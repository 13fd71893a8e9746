"""Side-by-side benchmark against the servers people run today.

`python -m bench.peers.run` reproduces the tables of bench/results/peers.json (docs/performance.md).
Each system runs as its own server process; each measurement runs in its own client process
(`bench.peers.client`), so CPU per request is counted per side and no library is shared.
"""
