typedef int sp_stub_json;
