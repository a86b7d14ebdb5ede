// Package invoice owns merchants and credentials, invoice creation and reads,
// lookup tokens, EIP-681 payment URIs and QR codes, and the invoice API
// http.Handler.
//
// Payment requests: [FormatPaymentURI] turns a deposit address, chain id and
// amount into "ethereum:<EIP-55 address>@<chainId>?value=<wei>",
// [ParsePaymentURI] reads one back strictly, and [QRPNG] and [QRSVG] draw the
// URI as a QR code (error correction M, 4-module quiet zone) for wallets to
// scan.
package invoice
