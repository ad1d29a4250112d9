"""Where kept analysis sessions live.

`base` is what every store is (records, signing, bounds, errors, the `SessionStore`
interface); `file` keeps them in a local directory (one process), `redis` in Redis
(shared by replicas); `factory` opens the configured one. Implementations import
`base` only; nothing here imports the session manager.
"""
