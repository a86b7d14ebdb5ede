package indexer

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

// gethBlockJSON is a block as geth renders it with full transactions.
func gethBlockJSON(txs int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"baseFeePerGas":"0x7","blobGasUsed":"0x0","difficulty":"0x0","excessBlobGas":"0x0","extraData":"0x","gasLimit":"0x1c9c380","gasUsed":"0x5208","hash":"0x65c3e4c1b6e0f0b6f3b2a8fe3a5e1e8f9c8d7b6a5f4e3d2c1b0a998877665544","logsBloom":"0x` + strings.Repeat("00", 256) + `","miner":"0x0000000000000000000000000000000000000000","mixHash":"0x1c8b3d9e5f7a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c","nonce":"0x0000000000000000","number":"0x1388","parentBeaconBlockRoot":"0x0000000000000000000000000000000000000000000000000000000000000000","parentHash":"0x9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b","receiptsRoot":"0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421","requestsHash":"0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","sha3Uncles":"0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347","size":"0x2e0","stateRoot":"0xd7f8974fb5ac78d9ac099b9ad5018bedc2ce0a72dad1827a1709da30580f0544","timestamp":"0x6553f100","transactions":[`)
	for i := range txs {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"blockHash":"0x65c3e4c1b6e0f0b6f3b2a8fe3a5e1e8f9c8d7b6a5f4e3d2c1b0a998877665544","blockNumber":"0x1388","blockTimestamp":"0x6553f100","from":"0x71562b71999873db5b286df957af199ec94617f7","gas":"0x5208","gasPrice":"0x3b9aca07","maxFeePerGas":"0x77359407","maxPriorityFeePerGas":"0x3b9aca00","hash":"0x%064x","input":"0x","nonce":"0x%x","to":"0x0000000000000000000000000000000000010%03x","transactionIndex":"0x%x","value":"0x%x","type":"0x2","accessList":[],"chainId":"0x539","v":"0x1","r":"0x8a4e7f5c1b2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f","s":"0x1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c","yParity":"0x1"}`, i+1, i, i, i, i+1)
	}
	sb.WriteString(`],"transactionsRoot":"0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421","uncles":[],"withdrawals":[],"withdrawalsRoot":"0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421"}`)
	return []byte(sb.String())
}

// BenchmarkDecodeBlock decodes a block of 100 transactions as geth renders
// it.
//
//	go test -run '^$' -bench DecodeBlock ./indexer
func BenchmarkDecodeBlock(b *testing.B) {
	raw := gethBlockJSON(100)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		blk, err := decodeBlock(raw, true)
		if err != nil || len(blk.Txs) != 100 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/tx")
}

// FuzzDecodeBlock: whatever a node sends, decoding returns a block or an
// error, never panics, and a decoded block is self-consistent.
func FuzzDecodeBlock(f *testing.F) {
	f.Add(gethBlockJSON(2), true)
	f.Add(gethBlockJSON(1), false)
	if raw, err := os.ReadFile("testdata/cosmos_blocks.json"); err == nil {
		var blocks []json.RawMessage
		if json.Unmarshal(raw, &blocks) == nil {
			for _, b := range blocks {
				f.Add([]byte(b), true)
			}
		}
	}
	f.Add([]byte(`{"number":"0x1","hash":"0x01","transactions":["0x02"]}`), true)
	f.Add([]byte(`{"number":1,"hash":null}`), false)
	f.Fuzz(func(t *testing.T, raw []byte, full bool) {
		b, err := decodeBlock(raw, full)
		if err != nil {
			return
		}
		if full && len(b.Txs) != b.TxCount {
			t.Fatalf("%d transactions decoded, TxCount %d", len(b.Txs), b.TxCount)
		}
		if !full && len(b.Txs) != 0 {
			t.Fatal("transactions decoded from a header")
		}
		for i, tx := range b.Txs {
			if tx.Index != i || tx.BlockHash != b.Hash || tx.BlockNumber != b.Number || tx.Input == nil {
				t.Fatalf("transaction %d inconsistent with its block: %+v", i, tx)
			}
		}
		if b.GasLimit > math.MaxInt64 || b.GasUsed > math.MaxInt64 {
			t.Fatal("gas not capped to BIGINT")
		}
	})
}
