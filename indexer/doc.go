// Package indexer follows an EVM chain into the shared database and serves
// what it wrote through a read API.
//
// An Indexer reads the node over three JSON-RPC methods (eth_chainId,
// eth_blockNumber and batched eth_getBlockByNumber with full transactions)
// through a Source — NewRPCSource wraps a go-ethereum *rpc.Client — and
// writes blocks, their transactions and the "indexer" cursor to a store
// (store/postgres or store/sqlite), each batch of blocks with the cursor in
// one database transaction. Blocks are decoded from the node's JSON, never
// through go-ethereum's types.Block, so the hash kept is the one the node
// reports: on Cosmos EVM chains it is not the keccak of the RLP header.
//
//	ix, err := indexer.New(indexer.NewRPCSource(rpcClient), st, indexer.Config{Backfill: true})
//	if err != nil { … }
//	err = ix.Run(ctx) // until ctx is cancelled
//
// Run holds the store's "indexer" lock, so several processes may run an
// indexer on one database and only one writes. With no cursor it starts at
// the node's head, or at StartBlock (genesis) when Config.Backfill is set;
// otherwise it resumes after its cursor. Far behind, it fetches batches
// concurrently and writes them in order (COPY on PostgreSQL), logging
// blocks/s and the ETA; near the head it polls every PollInterval. When the
// next block does not build on the indexed head, or the node's block at the
// indexed height differs, it walks back to the common ancestor, deletes the
// orphaned blocks and their transactions, records a store.Reorg and moves
// the cursor back, in one transaction, then indexes the new branch. A reorg
// deeper than MaxReorgDepth stops Run with store.ErrReorgTooDeep.
//
// NewClientSource is the other Source, on go-ethereum's client interfaces
// (Client: *ethclient.Client, the simulated backend's simulated.Client): it
// reads blocks through types.Block, whose hash is computed from the header
// — right on go-ethereum nodes and the simulated backend, wrong on Cosmos
// EVM chains, which must use NewRPCSource.
//
// With Config.Tokens set, each block's ERC-20 Transfer logs of those
// tokens are fetched by block hash (batched eth_getLogs, EIP-234) and
// written with the block into token_transfers; a reorg removes them with
// their block (see docs/tokens.md).
//
// ReadAPI is the read side, an http.Handler serving blocks, transactions,
// token transfers and an address's transactions from the database as JSON;
// mount it on a host's mux with ReadAPI.Register.
package indexer
