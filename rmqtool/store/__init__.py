"""The storage engine: RocketMQ 5.x store files written and read byte-compatibly.

`messagestore.MessageStore` is the facade. One job per module underneath: `mappedfile` (fixed-size
mapped files and their queues), `commitlog` (records), `consumequeue`, `index`, `checkpoint`,
`dispatch` (record -> CQ unit + index keys, live and in recovery), `flush` (async / group commit),
`lockfile` (`lock`, `abort`), `cleanup` (expiry), `config` (StoreConfig).
"""
