module github.com/loom-k8s/loom/bench

go 1.26.0

replace github.com/loom-k8s/loom => ../
