package main

import (
	"context"
	"testing"

	"github.com/openmhp/mhp-go/client"
)

// BenchmarkRead compares one signals/read three ways on the same packaged
// thermocycler: a direct call of the driver (the baseline), a kept client
// connection over HTTP, and a whole `mhp URL read NAME` invocation (dial,
// initialize, read, end the session), which is what a shell script pays.
func BenchmarkRead(b *testing.B) {
	url, dev := servePackage(b, tcPkg)
	ctx := context.Background()
	names := []string{"block_temperature"}
	b.Run("direct", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := dev.Read(ctx, names); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("client_http", func(b *testing.B) {
		d, err := client.Dial(ctx, url, client.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := d.Read(ctx, names); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cli_invocation", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			a, _, _ := testApp()
			if code := a.run(ctx, []string{url, "read", "block_temperature"}); code != 0 {
				b.Fatalf("exit %d", code)
			}
		}
	})
}
