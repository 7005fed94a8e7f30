void a() {
  x++;
}
void b() {
  x++;
}
