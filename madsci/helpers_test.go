package madsci_test

import "github.com/openmhp/mhp-go/binding"

func bindingNew(c binding.Config) (*binding.Driver, error) { return binding.New(c) }
