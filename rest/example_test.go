package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
)

// fakeAPIServer serves a pod, a 404 for anything else, a log, and a watch.
func fakeAPIServer() *httptest.Server {
	pod := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default", ResourceVersion: "7"}}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("watch") == "true":
			for _, typ := range []string{"ADDED", "MODIFIED", "DELETED"} {
				raw, _ := json.Marshal(pod)
				json.NewEncoder(w).Encode(metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}})
			}
		case r.URL.Path == "/api/v1/namespaces/default/pods/web-0/log":
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "hello from web-0\n")
		case r.URL.Path == "/api/v1/namespaces/default/pods/web-0":
			json.NewEncoder(w).Encode(pod)
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"pods \"nope\" not found"}`)
		}
	}))
}

func ExampleNew() {
	srv := fakeAPIServer()
	defer srv.Close()

	// Usually: cfg, err := config.Load(config.LoadOptions{})
	cfg := config.Config{Host: srv.URL}
	c, err := rest.New(cfg, rest.Options{ContentType: rest.Protobuf})
	if err != nil {
		fmt.Println(err)
		return
	}
	var pod corev1.Pod
	err = c.Get().Namespace("default").Resource("pods").Name("web-0").Do(context.Background(), &pod)
	fmt.Println(pod.Name, pod.ResourceVersion, err)
	// Output: web-0 7 <nil>
}

func ExampleRequest_Do_notFound() {
	srv := fakeAPIServer()
	defer srv.Close()
	c, _ := rest.New(config.Config{Host: srv.URL}, rest.Options{})

	var pod corev1.Pod
	err := c.Get().Namespace("default").Resource("pods").Name("nope").Do(context.Background(), &pod)
	fmt.Println(apierrors.IsNotFound(err))
	var se *rest.StatusError
	if errors.As(err, &se) {
		fmt.Println(se.Code, se.ErrStatus.Message)
	}
	// Output:
	// true
	// 404 pods "nope" not found
}

func ExampleRequest_DoRaw() {
	srv := fakeAPIServer()
	defer srv.Close()
	c, _ := rest.New(config.Config{Host: srv.URL}, rest.Options{})

	res, err := c.Get().Namespace("default").Resource("pods").Name("web-0").
		Options(&metav1.GetOptions{ResourceVersion: "0"}).DoRaw(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.StatusCode, res.ContentType, bytes.Contains(res.Body, []byte(`"web-0"`)))
	// Output: 200 application/json true
}

func ExampleRequest_Stream() {
	srv := fakeAPIServer()
	defer srv.Close()
	c, _ := rest.New(config.Config{Host: srv.URL}, rest.Options{})

	logs, err := c.Get().Namespace("default").Resource("pods").Name("web-0").SubResource("log").
		Options(&corev1.PodLogOptions{Follow: true}).Stream(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer logs.Close()
	io.Copy(stdout{}, logs)
	// Output: hello from web-0
}

type stdout struct{}

func (stdout) Write(p []byte) (int, error) { fmt.Print(string(p)); return len(p), nil }

func ExampleWatch() {
	srv := fakeAPIServer()
	defer srv.Close()
	c, _ := rest.New(config.Config{Host: srv.URL}, rest.Options{})

	w, err := rest.Watch[corev1.Pod](context.Background(), c.Get().Namespace("default").Resource("pods").
		Options(&metav1.ListOptions{ResourceVersion: "6", AllowWatchBookmarks: true}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Stop()
	for {
		ev, err := w.Next()
		if err == io.EOF {
			fmt.Println("end of stream")
			return
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		if ev.Type == "ERROR" {
			fmt.Println(ev.Err()) // for example 410 Expired: relist
			return
		}
		fmt.Println(ev.Type, ev.Object.Name) // ev.Object is a *corev1.Pod
	}
	// Output:
	// ADDED web-0
	// MODIFIED web-0
	// DELETED web-0
	// end of stream
}

func ExampleNewWatcher() {
	stream := `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"}}}
{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"42"}}}
`
	w, err := rest.NewWatcher[corev1.Pod](io.NopCloser(bytes.NewBufferString(stream)), "application/json")
	if err != nil {
		fmt.Println(err)
		return
	}
	for {
		ev, err := w.Next()
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s name=%q rv=%q\n", ev.Type, ev.Object.Name, ev.Object.ResourceVersion)
	}
	// Output:
	// ADDED name="a" rv=""
	// BOOKMARK name="" rv="42"
	// EOF
}

func ExampleObserverFunc() {
	srv := fakeAPIServer()
	defer srv.Close()
	obs := rest.ObserverFunc(func(_ context.Context, info rest.RequestInfo) {
		fmt.Println(info.Method, info.Resource, info.Code, info.Attempt)
	})
	c, _ := rest.New(config.Config{Host: srv.URL}, rest.Options{Observer: obs})
	_ = c.Get().Namespace("default").Resource("pods").Name("web-0").Do(context.Background(), nil)
	// Output: GET pods 200 0
}

func ExampleClient_Patch() {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type") + " " + string(b)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"settings"},"data":{"mode":"fast"}}`)
	}))
	defer srv.Close()
	c, _ := rest.New(config.Config{Host: srv.URL}, rest.Options{})

	var cm corev1.ConfigMap
	err := c.Patch("application/merge-patch+json").Namespace("default").Resource("configmaps").Name("settings").
		Options(&metav1.PatchOptions{FieldManager: "example"}).
		Body([]byte(`{"data":{"mode":"fast"}}`)).Do(context.Background(), &cm)
	fmt.Println(got)
	fmt.Println(cm.Data["mode"], err)
	// Output:
	// PATCH /api/v1/namespaces/default/configmaps/settings application/merge-patch+json {"data":{"mode":"fast"}}
	// fast <nil>
}

func ExampleTLSVerificationError() {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	// No CA given: the system roots do not trust the test server.
	c, _ := rest.New(config.Config{Host: srv.URL}, rest.Options{})
	err := c.Get().AbsPath("version").Do(context.Background(), nil)
	var tv *rest.TLSVerificationError
	fmt.Println(errors.As(err, &tv))
	// Output: true
}
