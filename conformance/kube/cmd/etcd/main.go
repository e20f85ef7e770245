// Command etcd is the etcd server at the version the pinned Kubernetes release tests against
// (go.etcd.io/etcd/server/v3 from its go.mod), built with CGO_ENABLED=0 like the other components.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
