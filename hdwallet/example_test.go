package hdwallet_test

import (
	"errors"
	"fmt"

	"github.com/evmpay/evmpay/hdwallet"
)

func ExampleParseMnemonic() {
	_, err := hdwallet.ParseMnemonic("test test test test test test test test test test test test")
	fmt.Println(errors.Is(err, hdwallet.ErrMnemonicChecksum), err)

	_, err = hdwallet.ParseMnemonic("test test test test test test test test test test test jnuk")
	fmt.Println(errors.Is(err, hdwallet.ErrMnemonicWord), err)

	m, err := hdwallet.ParseMnemonic("  Test test test test test test test test test test test JUNK\n")
	fmt.Println(err, m.Words(), m)
	// Output:
	// true hdwallet: mnemonic checksum mismatch
	// true hdwallet: mnemonic has an unrecognised word: word #12
	// <nil> 12 [REDACTED]
}

func ExampleNewWallet() {
	m, err := hdwallet.ParseMnemonic("test test test test test test test test test test test junk")
	if err != nil {
		panic(err)
	}
	w, err := hdwallet.NewWallet(m, "")
	if err != nil {
		panic(err)
	}
	// The signing side hands only the account xpub to the invoice API.
	fmt.Println(w.Deriver().XPub())
	addr, _ := w.Address(0)
	fmt.Println(addr)
	fmt.Println(w)
	// Output:
	// xpub6DyUKdwoLWmUJ4Tn9Bbsdtx7B5Ws18mEN19e5HT52ikE53FiUheSQXrZUNPovqfyKmw4579A1Mm3GXXKM39N64uooBfJ4tNAzFsEbodRTx4
	// 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266
	// [REDACTED]
}

func ExampleNewDeriver() {
	// The account node m/44'/60'/0'/0 of "test test ... junk".
	d, err := hdwallet.NewDeriver("xpub6DyUKdwoLWmUJ4Tn9Bbsdtx7B5Ws18mEN19e5HT52ikE53FiUheSQXrZUNPovqfyKmw4579A1Mm3GXXKM39N64uooBfJ4tNAzFsEbodRTx4")
	if err != nil {
		panic(err)
	}
	for i := uint32(0); i < 3; i++ {
		addr, err := d.Address(i)
		if err != nil {
			panic(err)
		}
		fmt.Println(i, addr)
	}
	_, err = d.Address(1 << 31)
	fmt.Println(errors.Is(err, hdwallet.ErrIndexOutOfRange))
	// Output:
	// 0 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266
	// 1 0x70997970C51812dc3A010C7d01b50e0d17dc79C8
	// 2 0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC
	// true
}
