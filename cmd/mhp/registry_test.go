package main

import (
	"reflect"
	"testing"
)

func TestRegistryHasEveryAdapter(t *testing.T) {
	r, err := newRegistry()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"madsci", "mqtt", "opcua", "pylabrobot", "ros2", "serial", "sila2"}
	if got := r.Kinds(); !reflect.DeepEqual(got, want) {
		t.Fatalf("kinds %v, want %v", got, want)
	}
}
