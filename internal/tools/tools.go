//go:build tools

// Package tools pins the project's dependencies while packages are being
// written, so that parallel work does not fight over go.mod.
package tools

import (
	_ "github.com/ethereum/go-ethereum/ethclient/simulated"
	_ "github.com/jmoiron/sqlx"
	_ "github.com/lib/pq"
	_ "github.com/makiuchi-d/gozxing/qrcode"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/skip2/go-qrcode"
	_ "github.com/stretchr/testify/require"
	_ "github.com/tyler-smith/go-bip39"
	_ "golang.org/x/crypto/argon2"
	_ "golang.org/x/time/rate"
	_ "modernc.org/sqlite"
)
