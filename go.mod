module github.com/loom-k8s/loom

go 1.26.0

require (
	k8s.io/api v0.36.3 // indirect
	k8s.io/apimachinery v0.36.3 // indirect
)
