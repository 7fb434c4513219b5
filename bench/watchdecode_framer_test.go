package bench

import (
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

var jsonFramer = json.Framer
