//go:build tools

// The control plane's commands, named so that `go mod tidy` keeps their whole module graph in go.sum:
// scripts/k8s-control-plane.sh builds them (k8s.io/kubernetes/cmd/kube-apiserver, .../kube-controller-manager,
// go.etcd.io/etcd/server/v3) with this module's replace list.
package main

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)
