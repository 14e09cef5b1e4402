// Command etcd is upstream etcd's server, built at the version Kubernetes pins,
// so the e2e harness needs no Docker image and no system package.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
