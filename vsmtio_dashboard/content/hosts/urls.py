from django.urls import re_path

from vsmtio_dashboard.content.hosts import views

urlpatterns = [
    re_path(r'^$', views.IndexView.as_view(), name='index'),
    re_path(r'^(?P<instance>[^/]+)/$', views.DetailView.as_view(),
            name='detail'),
]
