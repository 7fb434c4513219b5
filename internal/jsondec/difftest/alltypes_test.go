package difftest

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"sort"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/randfill"

	"github.com/loom-k8s/loom/internal/jsondec"
)

func filler(seed int64) *randfill.Filler {
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), serializer.NewCodecFactory(runtime.NewScheme()))
	f.NilChance(0.2).NumElements(0, 3)
	f.Funcs(func(q *resource.Quantity, c randfill.Continue) {
		*q = *resource.NewMilliQuantity(c.Int63n(1<<40), resource.DecimalSI)
	}, func(r *runtime.RawExtension, c randfill.Continue) {
		if c.Bool() {
			r.Raw = []byte(`{"a":1}`)
		}
	})
	return f
}

func allTypes(t *testing.T) []reflect.Type {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, rbacv1.AddToScheme, networkingv1.AddToScheme,
		policyv1.AddToScheme, storagev1.AddToScheme, coordinationv1.AddToScheme, discoveryv1.AddToScheme, eventsv1.AddToScheme,
		admissionregistrationv1.AddToScheme, autoscalingv2.AddToScheme, certificatesv1.AddToScheme, schedulingv1.AddToScheme,
		nodev1.AddToScheme, flowcontrolv1.AddToScheme, resourcev1.AddToScheme, admissionv1.AddToScheme,
		authenticationv1.AddToScheme, authorizationv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[reflect.Type]bool{}
	var types []reflect.Type
	for _, typ := range s.AllKnownTypes() {
		if !seen[typ] {
			seen[typ] = true
			types = append(types, typ)
		}
	}
	sort.Slice(types, func(i, j int) bool { return types[i].String() < types[j].String() })
	return types
}

// TestTypedDifferentialAllTypes fills every kind of 20 API groups randomly,
// encodes it with encoding/json, and decodes it with util/json (the
// reference) and with Decode: the results must be deeply equal.
func TestTypedDifferentialAllTypes(t *testing.T) {
	types := allTypes(t)
	iterations := 30
	if testing.Short() {
		iterations = 5
	}
	unsupported := 0
	for _, typ := range types {
		if !jsondec.TypedSupported(typ) {
			unsupported++
			t.Logf("not supported (left to encoding/json): %v: %v", typ, "see TypedSupported")
			continue
		}
		f := filler(int64(len(typ.String())))
		for i := 0; i < iterations; i++ {
			src := reflect.New(typ).Interface()
			f.Fill(src)
			data, err := json.Marshal(src)
			if err != nil {
				t.Fatalf("%v: %v", typ, err)
			}
			want, got := reflect.New(typ).Interface(), reflect.New(typ).Interface()
			if err := utiljson.Unmarshal(data, want); err != nil {
				t.Fatalf("%v: reference: %v", typ, err)
			}
			if err := jsondec.Decode(data, got); err != nil {
				t.Fatalf("%v iteration %d: %v\n%s", typ, i, err, data)
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("%v iteration %d: decoders differ\nwant %+v\n got %+v", typ, i, want, got)
			}
		}
	}
	t.Logf("%d types checked, %d unsupported", len(types)-unsupported, unsupported)
	if unsupported > len(types)/10 {
		t.Errorf("%d of %d types unsupported", unsupported, len(types))
	}
}
