package sweep

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// What a real Cosmos EVM node (evmd v0.7.0) answered to
// eth_sendRawTransaction in the project's evmd end-to-end run, recorded by
// `scripts/evmd-e2e.sh /path/to/evmd --record` into
// testdata/evmd-send-errors.json: each refusal is classified for what it
// means. evmd accepts a transaction whose fee cap is below the base fee
// without an error (it is then never mined; the sweep replaces it, same
// nonce, with a bumped fee): such an answer is recorded as "accepted".
func TestClassify_EvmdAnswers(t *testing.T) {
	b, err := os.ReadFile("testdata/evmd-send-errors.json")
	require.NoError(t, err)
	var answers []struct {
		What    string `json:"what"`
		Class   string `json:"class"`
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(b, &answers))
	require.NotEmpty(t, answers)
	for _, a := range answers {
		if a.Message == "accepted" {
			continue
		}
		require.Equal(t, a.Class, classify(errors.New(a.Message)).String(), "%s: %q", a.What, a.Message)
	}
}
