package controller_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/loom-k8s/loom/controller"
)

func TestNotAndLabelSelector(t *testing.T) {
	cm := func(l map[string]string, gen int64) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: l, Generation: gen}}
	}
	web, db := map[string]string{"app": "web"}, map[string]string{"app": "db"}

	sel := controller.LabelSelector(labels.SelectorFromSet(web))
	if !sel.Create(cm(web, 1)) || sel.Create(cm(db, 1)) || !sel.Delete(cm(web, 1)) || sel.Delete(cm(db, 1)) {
		t.Error("LabelSelector: creates and deletes of matching objects only")
	}
	if !sel.Update(cm(db, 1), cm(web, 1)) || !sel.Update(cm(web, 1), cm(db, 1)) || sel.Update(cm(db, 1), cm(db, 2)) {
		t.Error("LabelSelector: an update passes when the old or the new object matches")
	}

	notGen := controller.Not(controller.GenerationChanged())
	if notGen.Update(cm(web, 1), cm(web, 2)) || !notGen.Update(cm(web, 1), cm(web, 1)) {
		t.Error("Not(GenerationChanged): passes updates that keep the generation")
	}
	// GenerationChanged lets every create and delete through (nil), so
	// Not of it lets none through.
	if notGen.Create(cm(web, 1)) || notGen.Delete(cm(web, 1)) {
		t.Error("Not of a nil function passes nothing")
	}
	notSel := controller.Not(sel)
	if notSel.Create(cm(web, 1)) || !notSel.Create(cm(db, 1)) {
		t.Error("Not(LabelSelector): creates of objects that do not match")
	}
}
