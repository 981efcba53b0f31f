int main() { return 2; }  // to be written
