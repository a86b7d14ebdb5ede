package main

import "github.com/evmpay/evmpay/hdwallet"

// devMnemonic is the well-known development mnemonic (Hardhat, Anvil, …).
// Its accounts are funded on the dev chain; it is public — never use it on a
// real chain.
const devMnemonic = "test test test test test test test test test test test junk"

// devAccounts is how many accounts of devMnemonic the dev chain funds.
const devAccounts = 10

// devWallet returns the wallet of the well-known development mnemonic.
func devWallet() (*hdwallet.Wallet, error) {
	m, err := hdwallet.ParseMnemonic(devMnemonic)
	if err != nil {
		return nil, err
	}
	return hdwallet.NewWallet(m, "")
}
