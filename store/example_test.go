package store_test

import (
	"encoding/json"
	"fmt"

	"github.com/evmpay/evmpay/store"
)

// Amounts are exact: 2^256−1 wei adds, compares and prints without a float
// in sight, and JSON carries them as strings.
func ExampleAmount() {
	paid := store.MustParseAmount("1500000000000000000")
	more, _ := store.ParseAmount("500000000000000001")
	total, ok := paid.Add(more)
	fmt.Println(total, ok)
	fmt.Println(total.Cmp(store.MustParseAmount("2000000000000000000")) > 0)
	b, _ := json.Marshal(map[string]store.Amount{"amount_wei": total})
	fmt.Println(string(b))
	_, err := store.ParseAmount("1e18")
	fmt.Println(err)
	// Output:
	// 2000000000000000001 true
	// true
	// {"amount_wei":"2000000000000000001"}
	// invalid amount: want a non-negative decimal integer below 2^256
}
