// Package main exists so that this module has a package; it builds nothing of its own (see tools.go).
package main

func main() {}
