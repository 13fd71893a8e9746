"""Side-by-side benchmark against the servers people run today.

`python -m bench.peers.run` reproduces every table and plot in docs/performance.md ("Side by side").
Each system runs as its own server process; each measurement runs in its own client process
(`bench.peers.client`), so CPU per request is counted per side and no library is shared.
"""
